import type { Font, Glyph } from 'fontkit';

/**
 * Work that is pure in a font and was otherwise repeated for every certificate, remembered for every document of
 * the process:
 * - a glyph's outline decoding (`withMemos`), which fontkit's TrueType subsetter repeats for every glyph of every
 *   subset only to learn whether the glyph is composite (it copies the glyph's bytes as they are). Static fonts
 *   only: a variable font's decoding depends on its variation settings. A glyph keeps the characters it stands
 *   for, even when a subsetter was first to ask for it (see `glyphOf`);
 * - text shaping (fontkit's `layout`: glyph substitutions, kerning) word by word, as PDFKit keeps it
 *   (`SharedRuns`).
 */
export function withMemos(font: Font): Font {
  const getGlyph = font.getGlyph.bind(font);
  const glyphOf = (id: number, codePoints?: number[]): Glyph => {
    // fontkit keeps one glyph object per id, so its memo is made once
    const glyph = getGlyph(id, codePoints) as Glyph & { _decode?: () => unknown; codePoints: number[] };
    // ... with the code points of its first asking. A subsetter adding a composite glyph's parts (Greek ί's ι) asks
    // with none, and in a shared font the next document then found ι without its character: no ToUnicode entry,
    // so a reader copying the text dropped it. The first asking that names them fills them in.
    if (glyph && codePoints?.length && !glyph.codePoints.length) glyph.codePoints = codePoints;
    if (glyph?._decode && !Object.hasOwn(glyph, '_decode')) {
      const decode = glyph._decode.bind(glyph);
      let decoded: { value: unknown } | undefined;
      glyph._decode = () => (decoded ??= { value: decode() }).value;
    }
    return glyph;
  };
  if ('variationAxes' in font && Object.keys(font.variationAxes).length) return font;
  return Object.assign(font, { getGlyph: glyphOf });
}

/** The longest word kept from one document to the next: hashes, addresses and links are longer, and new in every certificate. */
const LONGEST = 32;
/** How many documents' fonts a memo serves between two looks at its size. */
const SWEEP_EVERY = 16;

/**
 * A memo of shaped words for PDFKit's font objects (their `layoutCache`), one per parsed font, shared by every
 * document set in it. PDFKit shapes text word by word, scales each word's positions to its 1,000 units once when
 * it adds the word to the memo, and only reads the run after; its own memo lasts one document, and most of a
 * certificate's words are the same fixed wording in every one. The memo stays a plain object, as PDFKit made it
 * (a Proxy counting its words cost 5 % of a certificate), so its size is looked at every `SWEEP_EVERY` documents
 * instead: words longer than `LONGEST` are dropped, and past `limit` words it starts over (partner text brings new
 * words without end).
 */
export class SharedRuns {
  private runs = Object.create(null) as Record<string, unknown>;
  private lent = 0;

  constructor(private readonly limit = 2_000) {}

  /** The memo for one more document's font. */
  lend(): Record<string, unknown> {
    if (++this.lent % SWEEP_EVERY === 0) {
      let words = 0;
      for (const word in this.runs) {
        if (word.length > LONGEST) delete this.runs[word];
        else words++;
      }
      if (words > this.limit) this.runs = Object.create(null) as Record<string, unknown>;
    }
    return this.runs;
  }

  /** Whether `memo` is the one lent now. */
  lends(memo: unknown): boolean {
    return memo === this.runs;
  }
}
