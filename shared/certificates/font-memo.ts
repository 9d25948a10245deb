import type { Font, Glyph, GlyphRun } from 'fontkit';

/**
 * A parsed font shared by every document of the process, with two memos of work that is pure in the font and
 * otherwise repeated for every certificate:
 * - text shaping (fontkit's `layout`: glyph substitutions, kerning) per word: most of a certificate's words are
 *   the same fixed wording in every one, and PDFKit keeps its own memo per document only. PDFKit scales the
 *   positions of the run it gets in place, so each call gets its own copy of the remembered positions;
 * - a glyph's outline decoding, which fontkit's TrueType subsetter repeats for every glyph of every subset only
 *   to learn whether the glyph is composite (it copies the glyph's bytes as they are). Static fonts only: a
 *   variable font's decoding depends on its variation settings. A glyph keeps the characters it stands for,
 *   even when a subsetter was first to ask for it (see `glyphOf`).
 */
/** The longest word remembered (PDFKit shapes word by word). */
const LONGEST = 32;

export function withMemos(font: Font, limit = 2_000): Font {
  const memo = new Map<string, GlyphRun>();
  const layout = font.layout.bind(font);
  const remembered = (text: string, features?: unknown, ...rest: unknown[]): GlyphRun => {
    // hashes, addresses and links are long and new in every certificate: remembering them would only churn the memo
    if (typeof text !== 'string' || text.length > LONGEST || rest.length) {
      return (layout as (...args: unknown[]) => GlyphRun)(text, features, ...rest);
    }
    const key = `${JSON.stringify(features ?? null)}\u0000${text}`;
    let run = memo.get(key);
    if (!run) {
      // partner text makes new words without end: the memo starts over rather than grow past its limit
      if (memo.size >= limit) memo.clear();
      run = layout(text, features as string[] | undefined);
      memo.set(key, run);
    }
    return copyOf(run);
  };
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
  if ('variationAxes' in font && Object.keys(font.variationAxes).length) return Object.assign(font, { layout: remembered });
  return Object.assign(font, { layout: remembered, getGlyph: glyphOf });
}

function copyOf(run: GlyphRun): GlyphRun {
  const copy = Object.assign(Object.create(Object.getPrototypeOf(run) as object) as GlyphRun, run);
  copy.glyphs = run.glyphs.slice();
  copy.positions = run.positions.map((p) => Object.assign(Object.create(Object.getPrototypeOf(p) as object), p));
  return copy;
}
