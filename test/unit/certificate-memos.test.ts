import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { deflateSync, inflateSync } from 'node:zlib';
import { expect } from 'chai';
import { create, type Font } from 'fontkit';
import PDFDocument from 'pdfkit';
import { SharedRuns, SharedSubsets, type GlyphList } from '../../shared/certificates/font-memo';
import { fontNamed, shapedWords } from '../../shared/certificates/fonts';
import { renderCertificate } from '../../shared/certificates/render';
import { deflateStreams } from '../../shared/certificates/streams';
import { EXAMPLE } from '../tools/certificate-example';

/** Each stream of a PDF: its dictionary and its bytes as written. */
const streamsOf = (pdf: Buffer) =>
  [...pdf.toString('latin1').matchAll(/<<([^]*?)>>\nstream\n([^]*?)\nendstream/g)].map(([, dict, data]) => ({
    dict: dict!,
    data: Buffer.from(data!, 'latin1'),
  }));

/** Counts fontkit's shaping of text (`layout`, shared by every TrueType font's prototype) while `run` runs. */
async function shapings(run: () => Promise<unknown>): Promise<number> {
  const any = create(readFileSync(require.resolve('dejavu-fonts-ttf/ttf/DejaVuSansMono.ttf'))) as Font;
  const prototype = Object.getPrototypeOf(any) as { layout: (...args: unknown[]) => unknown };
  const layout = prototype.layout;
  let count = 0;
  prototype.layout = function (this: unknown, ...args: unknown[]) {
    count++;
    return layout.apply(this, args);
  };
  try {
    await run();
  } finally {
    prototype.layout = layout;
  }
  return count;
}

/** Counts fontkit's encodings of a subset's font file (shared by every TrueType subset's prototype) while `run` runs. */
async function encodings(run: () => Promise<unknown>): Promise<number> {
  const prototype = Object.getPrototypeOf(fontNamed('mono').createSubset()) as { encode: () => Uint8Array };
  const encode = prototype.encode;
  let count = 0;
  prototype.encode = function (this: unknown) {
    count++;
    return encode.call(this);
  };
  try {
    await run();
  } finally {
    prototype.encode = encode;
  }
  return count;
}

/** A fresh subset of `font` holding the glyphs `text` is set in. */
function subsetOf(font: Font, text: string): GlyphList & { encode(): Uint8Array } {
  const subset = font.createSubset() as unknown as GlyphList & { encode(): Uint8Array };
  for (const glyph of font.layout(text).glyphs) subset.includeGlyph(glyph.id);
  return subset;
}

const randomHash = () => `0x${randomBytes(32).toString('hex')}`;

const words = (n: number, seed: string) => Array.from({ length: n }, (_, i) => `${seed}${i.toString(36)}`).join(' ');

describe("certificates: what one document leaves the next (shaped words, streams' level)", () => {
  it('renders a certificate to the same bytes whatever the process rendered before it', async () => {
    const first = await renderCertificate(EXAMPLE);
    // EXAMPLE's words in other faces and scripts, and more new words than the shared memo keeps, so it starts over
    for (let i = 0; i < 45; i++) {
      const title = i % 3 ? words(50, `w${i}x`) : `${EXAMPLE.filename} Engines Symphony Ελληνικά ${EXAMPLE.creators[0]!.full_name}`;
      const creators = [{ full_name: `${EXAMPLE.title} ${words(5, `c${i}x`)}`, roles: { author: true } }, ...EXAMPLE.creators];
      await renderCertificate({ ...EXAMPLE, title, filename: EXAMPLE.title, creators, commitment: EXAMPLE.mediaHash });
    }
    expect((await renderCertificate(EXAMPLE)).equals(first)).to.equal(true);
  });

  it('shapes a word once for every document, and shares none longer than 32 characters', async () => {
    // words no earlier test set, and a title without a space that the page breaks, measuring each of its prefixes
    const title = `${words(12, `t${Date.now().toString(36)}`)} ${'Q'.repeat(240)}`;
    const data = { ...EXAMPLE, title };
    const first = await shapings(() => renderCertificate(data));
    const again = await shapings(() => renderCertificate(data));
    // the second shapes only the words over 32 characters (the long title's prefixes, hashes, links) again
    expect(first).to.be.greaterThan(again + 12);
    const bold = shapedWords(fontNamed('serif-bold'));
    expect(
      title
        .split(' ')
        .slice(0, 12)
        .every((word) => bold.has(`${word} `)),
    ).to.equal(true);
    expect(bold.shared().filter((word) => word.length > 32)).to.deep.equal([]);
  });

  it('shapes a word once while it is shared, a longer one once per document, and starts over past its limit', () => {
    const shared = new SharedRuns<string>(3);
    const shaped: string[] = [];
    const shape = (word: string) => (shaped.push(word), `run of ${word}`);
    const [one, other] = [new Map<string, string>(), new Map<string, string>()];
    const long = `0x${'ab'.repeat(32)}`;
    expect([shared.runOf('a', one, shape), shared.runOf('a', other, shape), shared.runOf(long, one, shape)]).to.deep.equal([
      'run of a',
      'run of a',
      `run of ${long}`,
    ]);
    shared.runOf(long, one, shape);
    shared.runOf(long, other, shape);
    // `a` once for both documents; the longer word once for each, kept in its own memo only
    expect(shaped).to.deep.equal(['a', long, long]);
    expect([shared.size, shared.has(long), one.get(long), other.get(long)]).to.deep.equal([1, false, `run of ${long}`, `run of ${long}`]);
    // past the limit of three the shared words start over
    for (const word of ['b', 'c', 'd']) shared.runOf(word, one, shape);
    expect([shared.size, shared.has('a'), shared.has('d')]).to.deep.equal([1, false, true]);
  });

  it("embeds a font's subset that a document before it embedded without encoding it again, hashes' digits first", async () => {
    await renderCertificate(EXAMPLE);
    // another version of the work: its own hashes (every digit in another order), the same owner, link and wording
    const next = {
      ...EXAMPLE,
      commitment: randomHash(),
      mediaHash: randomHash(),
      merkleRoot: randomHash(),
      blockHash: randomHash(),
      txHash: randomHash(),
    };
    expect(await encodings(() => renderCertificate(next))).to.equal(0);
    // a new title is a new subset of the title's font, and only of it
    expect(await encodings(() => renderCertificate({ ...next, title: `${EXAMPLE.title} Quiz` }))).to.equal(1);
  });

  it('gives a known subset the bytes fontkit encodes afresh, and the glyphs its encoding adds, keeping the lists used last', () => {
    const serif = fontNamed('serif');
    // Ǻ is a composite glyph in EB Garamond: encoding adds its parts to the subset
    const text = 'Ǻngström';
    const first = subsetOf(serif, text);
    const before = first.glyphs.length;
    const files = new SharedSubsets(2);
    const file = files.fileOf(first, () => first.encode());
    expect(first.glyphs.length).to.be.greaterThan(before);
    let encoded = 0;
    const second = subsetOf(serif, text);
    expect(files.fileOf(second, () => (encoded++, second.encode()))).to.equal(file);
    expect([encoded, second.glyphs]).to.deep.equal([0, first.glyphs]);
    expect(Buffer.from(subsetOf(serif, text).encode()).equals(Buffer.from(file))).to.equal(true);
    // two lists kept: the one asked last stays, the other is encoded again when asked after a third
    const ask = (t: string) => {
      const subset = subsetOf(serif, t);
      files.fileOf(subset, () => (encoded++, subset.encode()));
    };
    ask('other');
    ask(text);
    ask('third');
    ask(text);
    expect([encoded, files.size]).to.deep.equal([2, 2]);
    ask('other');
    expect(encoded).to.equal(3);
  });

  it("deflates every one of a certificate's streams, at level 3", async () => {
    const streams = streamsOf(await renderCertificate(EXAMPLE));
    // the page's content, and each font's subset and ToUnicode map
    expect(streams.length).to.be.greaterThan(8);
    for (const { dict, data } of streams) {
      expect(dict).to.match(/\/Filter \/FlateDecode/);
      expect(deflateSync(inflateSync(data), { level: 3 }).equals(data)).to.equal(true);
    }
  });

  it('leaves as it is a stream PDFKit was told not to deflate (as it does the XMP metadata)', async () => {
    const doc = new PDFDocument({ autoFirstPage: false });
    deflateStreams(doc);
    const chunks: Buffer[] = [];
    doc.on('data', (chunk: Buffer) => chunks.push(chunk));
    const done = new Promise<Buffer>((resolve) => doc.on('end', () => resolve(Buffer.concat(chunks))));
    const plain = doc.ref({ Type: 'Plain' }) as unknown as { compress: boolean; end(chunk: string): void };
    plain.compress = false;
    plain.end('kept as written');
    (doc.ref({ Type: 'Deflated' }) as unknown as { end(chunk: string): void }).end('deflated at level 3');
    doc.end();
    const streams = streamsOf(await done);
    const kept = streams.find((s) => s.dict.includes('/Plain'))!;
    const deflated = streams.find((s) => s.dict.includes('/Deflated'))!;
    expect([kept.dict.includes('/Filter'), kept.data.toString()]).to.deep.equal([false, 'kept as written\n']);
    expect(deflated.dict).to.match(/\/Filter \/FlateDecode/);
    expect(inflateSync(deflated.data).toString()).to.equal('deflated at level 3\n');
  });
});
