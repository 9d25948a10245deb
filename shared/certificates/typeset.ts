import { clusters, fontFor, useFont, type Doc, type Face, type FontName } from './fonts';

/**
 * Line layout for text a partner sent (titles, file names, creators' names), which may need more than one
 * font (EB Garamond comes in one file per script, and DejaVu stands in for scripts it lacks): PDFKit draws one
 * font per call and cannot centre mixed-font text itself, so lines are broken and placed here, run by run, on a
 * shared baseline. Text is cut and split between user-perceived characters only, never inside one, and drawn as
 * sent: the characters of its glyphs, which a reader copies from the page, are the text's own, white space
 * included (runs of spaces, no-break spaces…); a line breaks only at breakable white space, which the break takes.
 */
export interface TypesetOptions {
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly size: number;
  readonly align?: 'left' | 'center';
  /** Lines beyond this are cut, the last ending with an ellipsis. */
  readonly maxLines?: number;
  readonly color?: string;
  /** Line height as a multiple of the size. */
  readonly leading?: number;
}

interface Run {
  readonly font: FontName;
  readonly text: string;
}

function runsOf(text: string, face: Face): Run[] {
  const runs: { font: FontName; text: string }[] = [];
  for (const cluster of clusters(text)) {
    const { font } = fontFor(cluster, face);
    const last = runs[runs.length - 1];
    if (last && last.font === font) last.text += cluster;
    else runs.push({ font, text: cluster });
  }
  return runs;
}

function measure(doc: Doc, text: string, face: Face, size: number): number {
  return runsOf(text, face).reduce((sum, run) => sum + useFont(doc, run.font).fontSize(size).widthOfString(run.text), 0);
}

/** White space a line may break at: all but the no-break spaces (U+00A0, U+2007, U+202F). */
const BREAK = /([^\S\u00a0\u2007\u202f]+)/;

/**
 * Control characters (tabs, line feeds…) have no glyph, and PDFKit would start a new line at a line feed: they
 * are drawn as spaces (`showsExactly` is false for such a text).
 */
const drawable = (text: string) => text.replace(/\p{Cc}/gu, ' ');

/** Breaks `text` into lines of at most `width` points (long words are split), at most `maxLines` of them. */
export function lineBreak(doc: Doc, text: string, face: Face, size: number, width: number, maxLines = Infinity): string[] {
  const lines: string[] = [];
  let line = '';
  // words, each but the first after the white space that precedes it, kept as it is
  const parts = drawable(text.trim()).split(BREAK);
  for (let i = 0; i < parts.length; i += 2) {
    const word = parts[i]!;
    const candidate = line ? `${line}${parts[i - 1]}${word}` : word;
    if (measure(doc, candidate, face, size) <= width) {
      line = candidate;
      continue;
    }
    if (line) lines.push(line);
    line = '';
    for (const cluster of clusters(word)) {
      if (line && measure(doc, line + cluster, face, size) > width) {
        lines.push(line);
        line = '';
      }
      line += cluster;
    }
  }
  if (line) lines.push(line);
  if (lines.length <= maxLines) return lines;
  const kept = lines.slice(0, maxLines);
  const last = clusters(kept[maxLines - 1]!);
  while (last.length && measure(doc, `${last.join('')}…`, face, size) > width) last.pop();
  kept[maxLines - 1] = `${last.join('').trimEnd()}…`;
  return kept;
}

/**
 * Whether `text`, typeset in `face`, can be read back from the page as it is, byte for byte: every character
 * drawn by a font that has its glyph, and no white space but single spaces between words. PDF readers (poppler,
 * pdf.js) rebuild the spaces between words from the glyphs' positions, so a run of spaces or a no-break space
 * comes back as one space, and invisible characters (format and control characters, unassigned code points)
 * cannot be seen; a glyph that is not there is a box.
 */
export function showsExactly(text: string, face: Face): boolean {
  const trimmed = text.trim();
  if (/ {2}|[^\P{Z} ]|\p{C}/u.test(trimmed)) return false;
  return clusters(trimmed).every((cluster) => fontFor(cluster, face).drawn);
}

/** The height `text` takes when typeset with these options. */
export function heightOf(doc: Doc, text: string, face: Face, options: Omit<TypesetOptions, 'x' | 'y'>): number {
  return lineBreak(doc, text, face, options.size, options.width, options.maxLines).length * options.size * (options.leading ?? 1.25);
}

/** Draws `text`; returns the y below its last line. */
export function typeset(doc: Doc, text: string, face: Face, options: TypesetOptions): number {
  const lineHeight = options.size * (options.leading ?? 1.25);
  const lines = lineBreak(doc, text, face, options.size, options.width, options.maxLines);
  let y = options.y;
  for (const line of lines) {
    const width = measure(doc, line, face, options.size);
    let x = options.align === 'center' ? options.x + (options.width - width) / 2 : options.x;
    // a shared alphabetic baseline, so Garamond and DejaVu runs sit on one line
    const baseline = y + options.size * 0.95;
    for (const run of runsOf(line, face)) {
      useFont(doc, run.font)
        .fontSize(options.size)
        .fillColor(options.color ?? '#000000');
      doc.text(run.text, x, baseline, { lineBreak: false, baseline: 'alphabetic' });
      x += doc.widthOfString(run.text);
    }
    y += lineHeight;
  }
  return y;
}
