import type { Font, Glyph } from 'fontkit';

/**
 * Work that is pure in a font and was otherwise repeated for every certificate, remembered for every document of
 * the process:
 * - a glyph's outline decoding (`withMemos`), which fontkit's TrueType subsetter repeats for every glyph of every
 *   subset only to learn whether the glyph is composite (it copies the glyph's bytes as they are). Static fonts
 *   only: a variable font's decoding depends on its variation settings. A glyph keeps the characters it stands
 *   for, even when a subsetter was first to ask for it (see `glyphOf`);
 * - text shaping (fontkit's `layout`: glyph substitutions, kerning) word by word, as PDFKit keeps it
 *   (`SharedRuns`);
 * - a subset's font file (`SharedSubsets`).
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

/**
 * The longest word kept from one document to the next: hashes and links are longer and new in every certificate,
 * as are the prefixes a document measures of a long word it breaks.
 */
const LONGEST = 32;

/**
 * Shaped words of one parsed font, shared by every document set in it. PDFKit shapes text word by word (its
 * font object's `layoutCached`), scales each word's positions to its 1,000 units once, and only reads the run
 * after; its memo of them lasted one document, and most of a certificate's words are the same fixed wording in
 * every one. A document now finds a word of at most `LONGEST` characters here, and a longer one in a memo of its
 * own, freed with the document as PDFKit's was: the text a document measures includes every prefix of a long word
 * it has to break, one glyph run each. Past `limit` words the shared ones start over (partner text brings new
 * words without end). Maps: documents reading the shared words through their memo's prototype cost 8 to 15 % more
 * of a certificate (docs/performance.md, section 10).
 */
export class SharedRuns<Run = unknown> {
  private readonly words = new Map<string, Run>();

  constructor(private readonly limit = 2_000) {}

  /** The run of `word`: shared, or kept in `own` (one document's) when longer; `shape` makes it when neither has it. */
  runOf(word: string, own: Map<string, Run>, shape: (word: string) => Run): Run {
    const kept = word.length > LONGEST ? own : this.words;
    let run = kept.get(word);
    if (run === undefined) {
      run = shape(word);
      if (kept === this.words && this.words.size >= this.limit) this.words.clear();
      kept.set(word, run);
    }
    return run;
  }

  /** Whether `word` is shared now. */
  has(word: string): boolean {
    return this.words.has(word);
  }

  /** How many words are shared now. */
  get size(): number {
    return this.words.size;
  }

  /** The words shared now. */
  shared(): string[] {
    return [...this.words.keys()];
  }
}

/** What `SharedSubsets` reads of a fontkit subset: its glyphs (ids in the font) in the order it numbers them. */
export interface GlyphList {
  readonly glyphs: readonly number[];
  includeGlyph(glyph: number): number;
}

/** A subset's font file as fontkit encoded it, and the glyphs the subset held after (a composite adds its parts). */
interface EncodedSubset {
  readonly file: Uint8Array;
  readonly glyphs: readonly number[];
}

/**
 * Font files of one parsed font's subsets, by the glyphs each holds in their order, shared by the documents set
 * in it. A document embeds a subset of each font it used, and fontkit encodes it afresh from the glyphs' list
 * (their outlines, metrics and the font's tables: about 0.4 ms a font): the fixed wording's fonts have the same
 * list in every certificate, and the hashes' font in every certificate of one owner (`fonts.ts` gives it the hex
 * digits first). The same list gives the same bytes, which are also deflated once (`streams.ts`). The `limit`
 * lists used last are kept (partner text makes new ones without end in the fonts it is set in).
 */
export class SharedSubsets {
  private readonly files = new Map<string, EncodedSubset>();

  constructor(private readonly limit = 32) {}

  /** The font file of `subset` as `encode` makes it; a known one leaves the subset as its encoding would. */
  fileOf(subset: GlyphList, encode: () => Uint8Array): Uint8Array {
    const key = subset.glyphs.join(',');
    let known = this.files.get(key);
    if (known) {
      this.files.delete(key); // the most recently used last
      for (const glyph of known.glyphs) subset.includeGlyph(glyph);
    } else {
      known = { file: encode(), glyphs: [...subset.glyphs] };
      if (this.files.size >= this.limit) this.files.delete(this.files.keys().next().value!);
    }
    this.files.set(key, known);
    return known.file;
  }

  /** How many font files are kept now. */
  get size(): number {
    return this.files.size;
  }
}
