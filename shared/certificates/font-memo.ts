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
