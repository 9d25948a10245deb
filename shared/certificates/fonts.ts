import { readFileSync } from 'node:fs';
import { create, type Font } from 'fontkit';
import type PDFDocument from 'pdfkit';
import { woffToSfnt } from './woff';
import { withMemos } from './font-memo';

export type Doc = InstanceType<typeof PDFDocument>;

/**
 * The certificate's faces: EB Garamond for the text (its Latin and Latin Extended files, the same design),
 * DejaVu for characters beyond them (Greek, Cyrillic…), DejaVu Sans Mono for hashes. Free licences (OFL,
 * Bitstream Vera), shipped by npm packages and embedded as subsets in each PDF.
 */
const GARAMOND = '@fontsource/eb-garamond/files/eb-garamond';
const FILES = {
  serif: `${GARAMOND}-latin-400-normal.woff`,
  'serif-ext': `${GARAMOND}-latin-ext-400-normal.woff`,
  'serif-bold': `${GARAMOND}-latin-600-normal.woff`,
  'serif-bold-ext': `${GARAMOND}-latin-ext-600-normal.woff`,
  'serif-italic': `${GARAMOND}-latin-400-italic.woff`,
  'serif-italic-ext': `${GARAMOND}-latin-ext-400-italic.woff`,
  'serif-wide': 'dejavu-fonts-ttf/ttf/DejaVuSerif.ttf',
  'serif-bold-wide': 'dejavu-fonts-ttf/ttf/DejaVuSerif-Bold.ttf',
  'serif-italic-wide': 'dejavu-fonts-ttf/ttf/DejaVuSerif-Italic.ttf',
  mono: 'dejavu-fonts-ttf/ttf/DejaVuSansMono.ttf',
} as const;

export type Face = 'serif' | 'serif-bold' | 'serif-italic';
export type FontName = keyof typeof FILES;

let loaded: Record<FontName, Font> | undefined;

/**
 * The fonts, read (WOFF unpacked) and parsed on first use, then shared by every later document: fontkit decodes
 * a font's tables (glyph shapes, kerning and substitution lookups) lazily and keeps them on the font object, so a
 * font parsed per document decoded them all again for each certificate (most of its rendering time). Each
 * document still makes its own subset of the glyphs it uses; a parsed font is only read from.
 */
function fonts(): Record<FontName, Font> {
  loaded ??= Object.fromEntries(
    Object.entries(FILES).map(([name, file]) => {
      const bytes = readFileSync(require.resolve(file));
      return [name, withMemos(create(file.endsWith('.woff') ? woffToSfnt(bytes) : bytes) as Font)];
    }),
  ) as Record<FontName, Font>;
  return loaded;
}

export function registerFonts(doc: Doc): void {
  // pdfkit takes a fontkit font as a font's source (anything with a layout function)
  for (const [name, font] of Object.entries(fonts())) doc.registerFont(name, font as unknown as Buffer);
}

// The unicode-ranges of the two Garamond files (as Fontsource cut them).
const LATIN =
  /[\u0020-\u007E\u00A0-\u00FF\u0131\u0152\u0153\u02BB\u02BC\u02C6\u02DA\u02DC\u2000-\u206F\u20AC\u2122\u2191\u2193\u2212\u2215]/u;
const LATIN_EXT =
  /[\u0100-\u02BA\u02BD-\u02C5\u02C7-\u02CC\u02CE-\u02D7\u02DD-\u02FF\u1E00-\u1E9F\u1EF2-\u1EFF\u20A0-\u20AB\u20AD-\u20C0\u2113\u2C60-\u2C7F\uA720-\uA7FF]/u;

/** The font that draws `char` in `face`. */
export function fontFor(char: string, face: Face): FontName {
  if (LATIN.test(char)) return face;
  if (LATIN_EXT.test(char)) return `${face}-ext` as FontName;
  return `${face}-wide` as FontName;
}
