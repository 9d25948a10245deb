import type { Font, GlyphRun } from 'fontkit';

/**
 * A font whose text shaping is remembered across documents. Shaping a word (fontkit's `layout`: glyph
 * substitutions, kerning) is pure in the font, the text and the features, and most of a certificate's words
 * are the same fixed wording in every one; PDFKit keeps its own memo per document only. PDFKit scales the
 * positions of the run it gets in place, so each call gets its own copy of the remembered positions.
 */
export function withShapingMemo(font: Font, limit = 20_000): Font {
  const memo = new Map<string, GlyphRun>();
  const layout = font.layout.bind(font);
  const remembered = (text: string, features?: unknown, ...rest: unknown[]): GlyphRun => {
    if (typeof text !== 'string' || rest.length) return (layout as (...args: unknown[]) => GlyphRun)(text, features, ...rest);
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
  return Object.assign(font, { layout: remembered });
}

function copyOf(run: GlyphRun): GlyphRun {
  const copy = Object.assign(Object.create(Object.getPrototypeOf(run) as object) as GlyphRun, run);
  copy.glyphs = run.glyphs.slice();
  copy.positions = run.positions.map((p) => Object.assign(Object.create(Object.getPrototypeOf(p) as object), p));
  return copy;
}
