import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { create, type Font } from 'fontkit';
import { expect } from 'chai';
import PDFDocument from 'pdfkit';
import { PDFParse } from 'pdf-parse';
import { registerFonts } from '../../shared/certificates/fonts';
import { renderCertificate } from '../../shared/certificates/render';
import { lineBreak, showsExactly } from '../../shared/certificates/typeset';
import { withMemos } from '../../shared/certificates/font-memo';
import { woffToSfnt } from '../../shared/certificates/woff';
import { computeCommitment, creatorsMerkleRoot, toHex } from '../../shared/registration/commitment';
import { EXAMPLE, EXAMPLE_AUDIO, EXAMPLE_CREATORS } from '../tools/certificate-example';

async function read(pdf: Buffer): Promise<{ text: string; pages: number }> {
  const parser = new PDFParse({ data: new Uint8Array(pdf) });
  try {
    const result = await parser.getText();
    return { text: result.text.replace(/\s+/g, ' '), pages: result.total };
  } finally {
    await parser.destroy();
  }
}

/**
 * The page's text as a reader copies it, lines as they are: no Unicode normalization (pdf.js would otherwise fold
 * U+2126 OHM SIGN into Ω, as NFKC does) and white space as extracted.
 */
async function lines(pdf: Buffer): Promise<string[]> {
  const parser = new PDFParse({ data: new Uint8Array(pdf) });
  try {
    return (await parser.getText({ disableNormalization: true })).text.split('\n');
  } finally {
    await parser.destroy();
  }
}

/** The embedded fonts' names, subset tags (`ABCDEF+`) dropped, as the PDF's font dictionaries name them. */
function fontsOf(pdf: Buffer): string[] {
  const names = [...pdf.toString('latin1').matchAll(/\/BaseFont\s*\/(?:[A-Z]{6}\+)?([^\s/<>[\]()]+)/g)].map((m) => m[1]!);
  return [...new Set(names)].sort();
}

const sha256 = (...parts: Buffer[]) => parts.reduce((hash, part) => hash.update(part), createHash('sha256')).digest();

describe('certificate PDF', () => {
  it('states every fact of the version on one A4 page', async () => {
    const pdf = await renderCertificate(EXAMPLE);
    expect(pdf.subarray(0, 5).toString()).to.equal('%PDF-');
    const { text, pages } = await read(pdf);
    expect(pages).to.equal(1);
    for (const fact of [
      EXAMPLE.title,
      EXAMPLE.filename,
      EXAMPLE.commitment,
      EXAMPLE.mediaHash,
      EXAMPLE.merkleRoot,
      EXAMPLE.blockHash,
      EXAMPLE.txHash,
      EXAMPLE.owner,
      EXAMPLE.explorerUrl,
      EXAMPLE.workId,
      '#1284',
      '4,521,877',
      'testnet',
      '2026-11-22 14:03:27',
      'Ada Lovelace',
      'Author, Composer',
      '00012345678',
      '0000 0001 2146 438X',
      'Léonie Dvořáková',
      'Version 2',
      'SHA-256 of the audio file',
      'Merkle tree of 32 slots',
    ]) {
      expect(text, fact).to.include(fact);
    }
  });

  it('continues a long list of creators on further pages, naming each once, in any script', async () => {
    const creators = Array.from({ length: 32 }, (_, i) => ({
      full_name: i % 4 ? `Creator ${i + 1}` : `Пётр Чайковский ${i + 1}`,
      roles: { composer: true },
      ipi: '00012345678',
    }));
    const title = 'Концерт № 1 — '.concat('a very long title '.repeat(16)).trim();
    const { text, pages } = await read(await renderCertificate({ ...EXAMPLE, title, creators }));
    expect(pages).to.be.within(2, 4);
    for (const [i, creator] of creators.entries()) {
      const row = new RegExp(`(?<!\\d)${i + 1}\\. ${creator.full_name}(?!\\d)`, 'g');
      expect(text.match(row), creator.full_name).to.have.length(1);
    }
    expect(text).to.include('Концерт № 1');
    expect(text).to.include(`page ${pages} of ${pages}`);
    expect(text).to.include(EXAMPLE.commitment);
  });

  it('tells how to check it with SHA-256, steps that the audio and the page alone are enough to follow', async () => {
    const { text } = await read(await renderCertificate(EXAMPLE));
    for (const words of [
      'Compute the SHA-256 of the audio file: it must equal the media hash above.',
      "Compute the SHA-256 of, in this order: the byte 0x01 (protocol version 1), the media hash (32 bytes), the title's length in UTF-8 bytes as 4 bytes little-endian then those bytes, and the creators' Merkle root (32 bytes). It must equal the commitment.",
    ]) {
      expect(text).to.include(words);
    }
    const printed = (name: string) => {
      const found = text.match(new RegExp(`${name.replace(/[()]/g, '\\$&')} (0x[0-9a-f]{64})`))?.[1];
      expect(found, name).to.be.a('string');
      return Buffer.from(found!.slice(2), 'hex');
    };
    // step 1, from the audio
    const mediaHash = sha256(EXAMPLE_AUDIO);
    expect(mediaHash.equals(printed('Media hash (SHA-256 of the audio)'))).to.equal(true);
    // step 2, as worded, from the media hash, the title and the Merkle root printed
    const title = Buffer.from(EXAMPLE.title, 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32LE(title.length);
    const commitment = sha256(Buffer.from([1]), mediaHash, length, title, printed("Creators' Merkle root"));
    expect(commitment.equals(printed('Commitment'))).to.equal(true);
  });

  it("says the creators' Merkle root needs the e-mails, which it does not print", async () => {
    const { text } = await read(await renderCertificate(EXAMPLE));
    expect(text).to.include(
      "That root is the top of a Merkle tree of 32 slots built with SHA-256 from each creator's name, e-mail, roles, IPI and ISNI as registered, and no e-mail is printed here: " +
        "that the creators listed are the ones committed can be checked only with the creators' details the registrant holds.",
    );
    // (spaces dropped: a cell may break an address across lines)
    for (const creator of EXAMPLE_CREATORS.filter((c) => c.email)) expect(text.replace(/ /g, '')).not.to.include(creator.email!);
    // what the page shows of the creators does not give their root; with the e-mails it does
    const shown = EXAMPLE_CREATORS.map(({ email: _, ...creator }) => creator);
    expect(toHex(creatorsMerkleRoot(shown))).not.to.equal(EXAMPLE.merkleRoot);
    expect(toHex(creatorsMerkleRoot(EXAMPLE_CREATORS))).to.equal(EXAMPLE.merkleRoot);
  });

  it('never cuts the title, which the commitment is checked against, however long', async () => {
    const title = `${'Полонез '.repeat(20)}${'W'.repeat(140)}`.slice(0, 300);
    const { text } = await read(await renderCertificate({ ...EXAMPLE, title }));
    expect(text.replace(/ /g, '')).to.include(title.replace(/ /g, ''));
  });
});

describe('certificate title text', () => {
  const doc = () => {
    const d = new PDFDocument({ autoFirstPage: false, font: null as unknown as string });
    registerFonts(d);
    return d;
  };

  it('keeps white space as sent within a line, and breaks only at breakable white space', () => {
    const title = 'Two  spaces,\u00a0a no-break\u2009and a thin one';
    expect(lineBreak(doc(), title, 'serif-bold', 20, 2000)).to.deep.equal([title]);
    // narrow: breaks at the run of spaces and the plain ones, never at the no-break space
    const broken = lineBreak(doc(), title, 'serif-bold', 20, 120);
    expect(broken.length).to.be.greaterThan(2);
    expect(broken.some((line) => line.includes('spaces,\u00a0a'))).to.equal(true);
    expect(broken.every((line) => line === line.trim())).to.equal(true);
  });

  it('says which titles the page gives back exactly', () => {
    for (const title of ['Symphony for Engines', 'Пётр Чайковский', 'Cafe\u0301 at 5 \u212A', 'Վահան Տերյան']) {
      expect(showsExactly(title, 'serif-bold'), title).to.equal(true);
    }
    for (const title of ['Two  spaces', 'No\u00a0break', 'Thin\u2009space', 'Tab\there', 'Zero\u200bwidth', 'Symphony 交響曲']) {
      expect(showsExactly(title, 'serif-bold'), title).to.equal(false);
    }
  });

  it('does not claim the page is enough for a title it cannot give back exactly', async () => {
    const claim = 'These steps need only the audio and this page';
    const qualified =
      'Step 2 needs the title as registered: this one has white space or characters that a page cannot give back as they are';
    const plain = (await read(await renderCertificate(EXAMPLE))).text;
    expect(plain).to.include(claim);
    expect(plain).not.to.include(qualified);
    for (const title of ['Two  spaces', 'Night\u00a0Song', 'Symphony 交響曲 for Engines']) {
      const { text, pages } = await read(await renderCertificate({ ...EXAMPLE, title }));
      expect(text, title).not.to.include(claim);
      expect(text, title).to.include(qualified);
      expect(text, title).to.include('The other steps need only the audio and this page');
      expect(pages, title).to.equal(1);
    }
  });
});

describe('certificate fonts', () => {
  const scripts: [string, string, string][] = [
    ['Cyrillic', 'Концерт для фортепиано с оркестром № 1', 'Пётр Ильич Чайковский'],
    ['Greek', 'Συμφωνία των Μηχανών', 'Μίκης Θεοδωράκης'],
    ['Vietnamese and Latin Extended', 'Bài ca của Nguyễn — Dvořák: Rusalka', 'Nguyễn Văn Tý'],
    ['Greek Extended and Cyrillic Extended', 'Ἀθῆναι · Ѳеодоръ', 'Ἡρόδοτος'],
  ];
  for (const [script, title, name] of scripts) {
    it(`sets a ${script} title and creator in EB Garamond, with no fallback font`, async () => {
      const pdf = await renderCertificate({ ...EXAMPLE, title, creators: [{ full_name: name, roles: { composer: true } }] });
      expect(fontsOf(pdf)).to.deep.equal(['DejaVuSansMono', 'EBGaramond-Italic', 'EBGaramond-Regular', 'EBGaramond-SemiBold']);
      // byte for byte: the title read from the page (its lines joined by a space) is what the commitment took
      const text = (await lines(pdf)).join(' ');
      expect(text).to.include(title);
      expect(text).to.include(`1. ${name}`);
    });
  }

  it('sets a decomposed accent as sent, in DejaVu when no Garamond file has the letter and its mark together', async () => {
    // e + U+0301: EB Garamond's Latin file has e, the combining acute is in its Latin Extended and Vietnamese ranges.
    // Setting the composed é instead would put é (U+00E9) in the text layer, not the bytes committed.
    const title = 'Nguyễn, Dvořák, Café'.normalize('NFD');
    const name = 'Léonie Dvořáková'.normalize('NFD');
    const pdf = await renderCertificate({ ...EXAMPLE, title, creators: [{ full_name: name, roles: { composer: true } }] });
    expect(fontsOf(pdf)).to.include.members(['EBGaramond-SemiBold', 'DejaVuSerif-Bold']);
    const text = await lines(pdf);
    expect(text).to.include(title);
    expect(text).not.to.include(title.normalize('NFC'));
    expect(text.join('\n')).to.include(`1. ${name}`);
  });

  it('keeps the Kelvin, Ohm and Angstrom signs and mixed NFC and NFD accents, so the commitment is recomputed from the page', async () => {
    for (const title of ['Absolute zero, 0 \u212A', '50 \u2126 into 1 \u212B', 'Caf\u00e9 and Cafe\u0301', 'K and \u212A']) {
      const hashes = computeCommitment(sha256(EXAMPLE_AUDIO), title, EXAMPLE_CREATORS);
      const pdf = await renderCertificate({ ...EXAMPLE, title, commitment: toHex(hashes.commitment) });
      const text = await lines(pdf);
      // the title's line, taken from the page as it comes, gives the commitment printed
      const line = text[2]!;
      expect(line, title).to.equal(title);
      const bytes = Buffer.from(line, 'utf8');
      const length = Buffer.alloc(4);
      length.writeUInt32LE(bytes.length);
      const recomputed = sha256(Buffer.from([1]), hashes.mediaHash, length, bytes, hashes.merkleRoot);
      expect(toHex(recomputed), title).to.equal(toHex(hashes.commitment));
      expect(text.join(' ')).to.include(toHex(hashes.commitment));
    }
  });

  it('falls back to DejaVu Serif only for what EB Garamond lacks, and still renders', async () => {
    const pdf = await renderCertificate({
      ...EXAMPLE,
      title: 'Symphony 交響曲 for Engines',
      creators: [{ full_name: 'Վահան Տերյան', roles: { author: true } }],
    });
    expect(fontsOf(pdf)).to.deep.equal([
      'DejaVuSansMono',
      'DejaVuSerif-Bold',
      'EBGaramond-Italic',
      'EBGaramond-Regular',
      'EBGaramond-SemiBold',
    ]);
    const { text, pages } = await read(pdf);
    expect(pages).to.equal(1);
    // the Armenian name is DejaVu's; the CJK neither font has draws as missing glyphs, the Latin around it as usual
    expect(text).to.include('1. Վահան Տերյան');
    expect(text).to.include('Symphony');
    expect(text).to.include('for Engines');
  });

  it("keeps a glyph's characters when a subsetter was first to ask for it (a font is shared by every document)", () => {
    const file = require.resolve('@fontsource/eb-garamond/files/eb-garamond-greek-600-normal.woff');
    const parse = () => create(woffToSfnt(readFileSync(file))) as Font;
    const iota = parse().glyphForCodePoint(0x3b9).id;
    const font = withMemos(parse());
    // as fontkit's subsetter adds the parts of a composite glyph (ί) to one document's subset: no characters
    font.getGlyph(iota);
    // the next document sets ι itself, and its ToUnicode entry comes from the glyph's code points
    expect(font.layout('ναι').glyphs.map((glyph) => glyph.codePoints)).to.deep.equal([[0x3bd], [0x3b1], [0x3b9]]);
  });
});
