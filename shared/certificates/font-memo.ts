import type { Font, Glyph } from 'fontkit';

/**
 * Work that is pure in a font and was otherwise repeated for every certificate, remembered for every document of
 * the process:
 * - a glyph's outline decoding (`withMemos`), which fontkit's TrueType subsetter repeats for every glyph of every
 *   subset only to learn whether the glyph is composite (it copies the glyph's bytes as they are). Static fonts
 *   only: a variable font's decoding depends on its variation settings. A glyph keeps the characters it stands
 *   for, even when a subsetter was first to ask for it (see `glyphOf`);
 * - text shaping (fontkit's `layout`: glyph substitutions, kerning) word by word, as PDFKit keeps it
 *   (`sharedRuns`).
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

/** The longest word shared: hashes, addresses and links are longer, and new in every certificate. */
const LONGEST = 32;
/** How many longer words are kept, for the document that set them (it lays out each more than once). */
const RECENT = 64;

/**
 * A memo of shaped words for PDFKit's font object of one document (its `layoutCache`), to be shared by every
 * document set in the same parsed font. PDFKit shapes text word by word, scales each word's positions to its
 * 1,000 units once when it adds the word, and only reads the run after; its own memo lasts one document, and most
 * of a certificate's words are the same fixed wording in every one. Partner text brings new words without end:
 * the memo starts over at `limit` words, and words longer than `LONGEST` are kept only among the last `RECENT`.
 */
export function sharedRuns(limit = 2_000): Record<string, unknown> {
  const words = new Map<string, unknown>();
  const recent = new Map<string, unknown>();
  return new Proxy(Object.create(null) as Record<string, unknown>, {
    get: (_, word) => (typeof word !== 'string' ? undefined : word.length > LONGEST ? recent.get(word) : words.get(word)),
    set: (_, word, run) => {
      if (typeof word !== 'string') return true;
      const kept = word.length > LONGEST ? recent : words;
      if (kept.size >= (kept === recent ? RECENT : limit)) kept.clear();
      kept.set(word, run);
      return true;
    },
  });
}
