import { expect } from 'chai';
import fc from 'fast-check';
import QRCode from 'qrcode';
import { clusters } from '../../shared/certificates/fonts';
import { qrRuns } from '../../shared/certificates/ornaments';

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
});
