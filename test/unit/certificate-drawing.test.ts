import { deflateSync, inflateSync } from 'node:zlib';
import { expect } from 'chai';
import fc from 'fast-check';
import QRCode from 'qrcode';
import { clusters } from '../../shared/certificates/fonts';
import { qrRuns } from '../../shared/certificates/ornaments';
import { SharedRuns } from '../../shared/certificates/font-memo';
import { renderCertificate } from '../../shared/certificates/render';
import { EXAMPLE } from '../tools/certificate-example';

const segmenter = new Intl.Segmenter('en', { granularity: 'grapheme' });
const bySegmenter = (text: string) => Array.from(segmenter.segment(text), (s) => s.segment);

describe('certificate drawing', () => {
  it('splits text into user-perceived characters exactly as the grapheme segmenter does', () => {
    // characters around the fast path's edge: CR LF, a soft hyphen, the last character below U+0300 and the first
    // combining mark, emoji with a joiner and skin tone, Hangul jamo, regional indicators
    const edge = fc.constantFrom(
      '\r',
      '\n',
      '\u00ad',
      '\u02ff',
      '\u0300',
      '\u0301',
      'e',
      ' ',
      '\u200d',
      '👩',
      '🏽',
      '\u1100',
      '\u1161',
      '🇫',
      '🇷',
    );
    const text = fc.oneof(
      fc.string({ unit: edge, maxLength: 12 }),
      fc.string({ unit: fc.constantFrom('\r', '\n', 'a', '\u00ad', '\u02ff'), maxLength: 12 }),
      fc.string({ unit: fc.integer({ min: 0, max: 0x30f }).map((c) => String.fromCharCode(c)), maxLength: 40 }),
      fc.string({ unit: 'grapheme', maxLength: 20 }),
      fc.string({ unit: 'binary', maxLength: 20 }),
    );
    fc.assert(
      fc.property(text, (t) => {
        expect(clusters(t)).to.deep.equal(bySegmenter(t));
      }),
      { numRuns: 2000 },
    );
    expect(clusters('Cafe\u0301\r\nOK')).to.deep.equal(['C', 'a', 'f', 'e\u0301', '\r\n', 'O', 'K']);
    expect(clusters('OK\r\n\r')).to.deep.equal(['O', 'K', '\r\n', '\r']);
  });

  it("draws a QR code's dark modules, each exactly once, as the fewest runs of a row", () => {
    fc.assert(
      fc.property(fc.webUrl({ withQueryParameters: true }), (url) => {
        const { count, runs } = qrRuns(url);
        const qr = QRCode.create([{ data: Buffer.from(url, 'utf8'), mode: 'byte' }], { errorCorrectionLevel: 'M' });
        expect(count).to.equal(qr.modules.size);
        const drawn = new Set<string>();
        for (const { row, col, length } of runs) {
          expect(length).to.be.greaterThan(0);
          for (let c = col; c < col + length; c++) {
            expect(drawn.has(`${row},${c}`), `module ${row},${c} drawn twice`).to.equal(false);
            drawn.add(`${row},${c}`);
          }
          // a run ends where the row's dark modules end: no two runs touch
          if (col + length < count) expect(qr.modules.get(row, col + length), `run at ${row},${col} stops short`).to.not.be.ok;
        }
        for (let row = 0; row < count; row++)
          for (let col = 0; col < count; col++) expect(drawn.has(`${row},${col}`)).to.equal(Boolean(qr.modules.get(row, col)));
        expect(runs.length).to.be.lessThan(drawn.size);
      }),
      { numRuns: 50 },
    );
  });

  it('renders a certificate to the same bytes whatever the process rendered before it (shaped words are shared)', async () => {
    const first = await renderCertificate(EXAMPLE);
    // EXAMPLE's words in other faces and scripts, and more new words than the shared memo keeps, so it starts over
    const words = (n: number, seed: number) => Array.from({ length: n }, (_, i) => `w${(seed * 97 + i).toString(36)}`).join(' ');
    for (let i = 0; i < 45; i++) {
      const title = i % 3 ? words(50, i) : `${EXAMPLE.filename} Engines Symphony Ελληνικά ${EXAMPLE.creators[0]!.full_name}`;
      const creators = [{ full_name: `${EXAMPLE.title} ${words(5, i)}`, roles: { author: true } }, ...EXAMPLE.creators];
      await renderCertificate({ ...EXAMPLE, title, filename: EXAMPLE.title, creators, commitment: EXAMPLE.mediaHash });
    }
    expect((await renderCertificate(EXAMPLE)).equals(first)).to.equal(true);
  });

  it('lends one memo to every document, dropping longer words every 16th time and starting over past its limit', () => {
    const shared = new SharedRuns(3);
    const long = `0x${'ab'.repeat(32)}`;
    // the first fifteen documents share one memo, longer words included
    const memo = shared.lend();
    Object.assign(memo, { a: 1, b: 2, [long]: 3 });
    for (let i = 2; i < 16; i++) expect(shared.lend()).to.equal(memo);
    expect(shared.lends(memo)).to.equal(true);
    // the sixteenth drops the longer word and keeps the short ones (two, within the limit of three)
    expect(shared.lend()).to.equal(memo);
    expect({ ...memo }).to.deep.equal({ a: 1, b: 2 });
    // past the limit, the next look starts a new memo
    Object.assign(memo, { c: 3, d: 4 });
    for (let i = 17; i < 32; i++) expect(shared.lend()).to.equal(memo);
    const next = shared.lend();
    expect(next).not.to.equal(memo);
    expect({ ...next }).to.deep.equal({});
    expect([shared.lends(next), shared.lends(memo)]).to.deep.equal([true, false]);
  });

  it("deflates every one of the document's streams, at level 3", async () => {
    const pdf = (await renderCertificate(EXAMPLE)).toString('latin1');
    const streams = [...pdf.matchAll(/<<([^]*?)>>\nstream\n([^]*?)\nendstream/g)].map(([, dict, data]) => ({
      dict: dict!,
      data: Buffer.from(data!, 'latin1'),
    }));
    // the page's content, and each font's subset and ToUnicode map
    expect(streams.length).to.be.greaterThan(8);
    for (const { dict, data } of streams) {
      expect(dict).to.match(/\/Filter \/FlateDecode/);
      expect(deflateSync(inflateSync(data), { level: 3 }).equals(data)).to.equal(true);
    }
  });
});
