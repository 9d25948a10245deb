import { readFileSync } from 'node:fs';
import { create, type Font } from 'fontkit';
import type PDFDocument from 'pdfkit';
import { woffToSfnt } from './woff';
import { SharedRuns, SharedSubsets, withMemos, type GlyphList } from './font-memo';

export type Doc = InstanceType<typeof PDFDocument>;

/**
 * The certificate's faces: EB Garamond for the text, DejaVu Serif only for characters EB Garamond has not
 * (Armenian, Georgian…; CJK, Arabic and Hebrew neither has: they show as DejaVu's missing-glyph box), DejaVu
 * Sans Mono for hashes. Free licences (OFL, Bitstream Vera), shipped by npm packages and
 * embedded as subsets in each PDF.
 *
 * Fontsource cuts EB Garamond into one file per script (Latin, Latin Extended, Vietnamese, Cyrillic, Cyrillic
 * Extended, Greek, Greek Extended), all the same design; its `unicode.json` gives each file's unicode-range.
 * A character is set from the first file whose range holds it and which has its glyph.
 */
export type Face = 'serif' | 'serif-bold' | 'serif-italic';
/** A font's name in a document: `serif`, `serif-cyrillic`, `serif-bold-wide` (DejaVu), `mono`… */
export type FontName = string;

const GARAMOND = '@fontsource/eb-garamond';
const STYLES: Record<Face, string> = { serif: '400-normal', 'serif-bold': '600-normal', 'serif-italic': '400-italic' };
const DEJAVU: Record<Face | 'mono', string> = {
  serif: 'DejaVuSerif',
  'serif-bold': 'DejaVuSerif-Bold',
  'serif-italic': 'DejaVuSerif-Italic',
  mono: 'DejaVuSansMono',
};
const FACES = Object.keys(STYLES) as Face[];

/** The subsets in the order a character is looked for (their ranges overlap on a few combining marks). */
const SUBSETS = ['latin', 'latin-ext', 'vietnamese', 'cyrillic', 'cyrillic-ext', 'greek', 'greek-ext'] as const;
type Subset = (typeof SUBSETS)[number];

/** Each subset's unicode-range as [first, last] code point pairs. */
const RANGES: ReadonlyMap<Subset, readonly [number, number][]> = (() => {
  const ranges = JSON.parse(readFileSync(require.resolve(`${GARAMOND}/unicode.json`), 'utf8')) as Record<string, string>;
  return new Map(
    SUBSETS.map((subset) => {
      const spec = ranges[subset];
      if (!spec) throw new Error(`${GARAMOND} has no ${subset} subset`);
      const pairs = spec.split(',').map((part) => {
        const [first, last = first] = part.trim().replace(/^U\+/i, '').split('-') as [string, string?];
        return [parseInt(first, 16), parseInt(last, 16)] as [number, number];
      });
      return [subset, pairs];
    }),
  );
})();

const inRange = (subset: Subset, codePoint: number) => RANGES.get(subset)!.some(([first, last]) => codePoint >= first && codePoint <= last);

/** The name of a Garamond subset's font in `face`; the Latin one is the face's own name. */
const garamond = (face: Face, subset: Subset): FontName => (subset === 'latin' ? face : `${face}-${subset}`);

const FILES = new Map<FontName, string>([
  ...FACES.flatMap((face) =>
    SUBSETS.map((subset) => [garamond(face, subset), `${GARAMOND}/files/eb-garamond-${subset}-${STYLES[face]}.woff`] as const),
  ),
  ...FACES.map((face) => [`${face}-wide`, `dejavu-fonts-ttf/ttf/${DEJAVU[face]}.ttf`] as const),
  ['mono', `dejavu-fonts-ttf/ttf/${DEJAVU.mono}.ttf`],
]);

/**
 * The fonts parsed so far, shared by every later document: fontkit decodes a font's tables (glyph shapes,
 * kerning and substitution lookups) lazily and keeps them on the font object, so a font parsed per document
 * decoded them all again for each certificate (most of its rendering time). A file is read (WOFF unpacked) and
 * parsed the first time a character needs it, so a process that only ever sets Latin never parses the Greek.
 * Each document still makes its own subset of the glyphs it uses; a parsed font is only read from.
 */
const parsed = new Map<FontName, Font>();

function font(name: FontName): Font {
  let found = parsed.get(name);
  if (!found) {
    const file = FILES.get(name);
    if (!file) throw new Error(`no font ${name}`);
    const bytes = readFileSync(require.resolve(file));
    found = withMemos(create(file.endsWith('.woff') ? woffToSfnt(bytes) : bytes) as Font);
    parsed.set(name, found);
  }
  return found;
}

/** Makes `name` the document's current font (embedded on first use in the document). */
export function useFont(doc: Doc, name: FontName): Doc {
  // pdfkit takes a fontkit font as a font's source (anything with a layout function), cached per document by name
  return doc.font(font(name) as unknown as Buffer, name);
}

/**
 * The fixed wording's fonts, by name (`doc.font('serif')`); partner text goes through `useFont`. Whichever way a
 * font is chosen, the document shapes its words through the ones every document set in it shares (`SharedRuns`).
 */
export function registerFonts(doc: Doc): void {
  for (const name of [...FACES, 'mono']) doc.registerFont(name, font(name) as unknown as Buffer);
  const served = new Set<EmbeddedFont>();
  const select = doc.font.bind(doc);
  doc.font = ((...args: Parameters<Doc['font']>) => {
    select(...args);
    const current = (doc as unknown as { _font?: EmbeddedFont })._font;
    // a fontkit font's (PDFKit's standard fonts have no runs to share, and none is drawn here)
    if (current?.font && typeof current.layoutRun === 'function' && !served.has(current)) {
      served.add(current);
      const runs = shapedWords(current.font);
      const own = new Map<string, unknown>();
      const shape = current.layoutRun.bind(current);
      current.layoutCached = (word) => runs.runOf(word, own, shape);
      const subset = current.subset;
      const encode = subset.encode.bind(subset);
      const files = subsetFiles(current.font);
      subset.encode = () => files.fileOf(subset, encode);
      // the hashes' digits first, in one order: the subset then depends on the owner and the link only
      if (current.font === font('mono')) current.encode(HEX_DIGITS);
    }
    return doc;
  }) as Doc['font'];
}

/** What `registerFonts` uses of PDFKit's font object of one document. */
interface EmbeddedFont {
  readonly font?: Font;
  layoutRun(word: string): unknown;
  layoutCached(word: string): unknown;
  readonly subset: GlyphList & { encode(): Uint8Array };
  encode(text: string): unknown;
}

/** What every hash on a certificate is written with (five random 32-byte hashes hold all sixteen digits). */
const HEX_DIGITS = '0x0123456789abcdef';

/** Each parsed font's shaped words, shared by the documents set in it. */
const shaped = new WeakMap<Font, SharedRuns>();

/** The shaped words the documents set in `parsedFont` share (`fontNamed` gives a name's parsed font). */
export function shapedWords(parsedFont: Font): SharedRuns {
  let runs = shaped.get(parsedFont);
  if (!runs) shaped.set(parsedFont, (runs = new SharedRuns()));
  return runs;
}

/** Each parsed font's subsets' files, shared by the documents set in it. */
const subsets = new WeakMap<Font, SharedSubsets>();

/** The subsets' files the documents set in `parsedFont` share. */
export function subsetFiles(parsedFont: Font): SharedSubsets {
  let files = subsets.get(parsedFont);
  if (!files) subsets.set(parsedFont, (files = new SharedSubsets()));
  return files;
}

/** The parsed font of a name (`serif`, `mono`…), as every document gets it. */
export const fontNamed = (name: FontName): Font => font(name);

const segmenter = new Intl.Segmenter('en', { granularity: 'grapheme' });

/**
 * No two characters below U+0300 make one cluster together, except CR LF (UAX #29: none of them is Extend,
 * SpacingMark, Prepend, ZWJ, a regional indicator or Hangul). Text with anything else, a combining mark or a
 * joiner after a Latin letter say, goes to the segmenter.
 */
const MAY_JOIN = /\r|[\u0300-\uffff]/;

/**
 * `text` as user-perceived characters: a letter with its combining marks is one. Asked for every word, the
 * segmenter took 7.5 % of a certificate's rendering, and almost every word is Latin without a combining mark.
 */
export const clusters = (text: string): string[] =>
  MAY_JOIN.test(text) ? Array.from(segmenter.segment(text), (s) => s.segment) : text.split('');

/** The font a cluster is set in, and whether that font has a glyph for each of its characters. */
export interface Choice {
  readonly font: FontName;
  readonly drawn: boolean;
}

const chosen = new Map<string, Choice>();

/**
 * The font that draws `cluster` (one grapheme) in `face`, as sent: never another form of it (the NFC of a
 * decomposed accent, K for KELVIN SIGN), since the glyphs' characters are the PDF's text layer, and the title
 * read from it must be the bytes the commitment took. A cluster no Garamond file has whole (a letter with a
 * combining mark of another file's range, the Kelvin, Ohm and Angstrom signs) is DejaVu's, which has a glyph of
 * its own for each of those characters.
 */
export function fontFor(cluster: string, face: Face): Choice {
  const key = `${face}\u0000${cluster}`;
  let choice = chosen.get(key);
  if (!choice) {
    const wide: FontName = `${face}-wide`;
    const garamondFont = choose(cluster, face);
    choice = garamondFont
      ? { font: garamondFont, drawn: true }
      : { font: wide, drawn: Array.from(cluster).every((char) => font(wide).hasGlyphForCodePoint(char.codePointAt(0)!)) };
    // partner text brings new characters without end: the memo starts over rather than grow
    if (chosen.size >= 4_000) chosen.clear();
    chosen.set(key, choice);
  }
  return choice;
}

/** The first Garamond subset whose range holds every code point of `cluster` and that has their glyphs. */
function choose(cluster: string, face: Face): FontName | undefined {
  const codePoints = Array.from(cluster, (char) => char.codePointAt(0)!);
  for (const subset of SUBSETS) {
    if (!codePoints.every((c) => inRange(subset, c))) continue;
    const name = garamond(face, subset);
    if (codePoints.every((c) => font(name).hasGlyphForCodePoint(c))) return name;
  }
  return undefined;
}
