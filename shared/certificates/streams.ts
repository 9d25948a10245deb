import { deflateSync } from 'node:zlib';
import type { Doc } from './fonts';

/**
 * zlib's level for the document's streams. PDFKit deflates every stream at zlib's default, 6, and has no option
 * for another. For a certificate's streams (the page's content, about 50 KB, and four or five font subsets of
 * about 12 KB), level 3 took 0.6 ms less a certificate than level 6 (1.1 against 1.6–1.8 ms) for 4 % more bytes
 * (45.7 against 43.8 KB): zlib's levels 1 to 3 skip its lazy matching.
 */
const LEVEL = 3;

/**
 * Deflated bytes of a stream written in one chunk, by that chunk: a font subset's file is the same object in
 * every document that has the same subset (font-memo.ts `SharedSubsets`), and is deflated once. Kept as long
 * as the chunk is.
 */
const deflated = new WeakMap<Uint8Array, Buffer>();

const deflateOnce = (chunk: Uint8Array): Buffer => {
  let bytes = deflated.get(chunk);
  if (!bytes) deflated.set(chunk, (bytes = deflateSync(chunk, { level: LEVEL })));
  return bytes;
};

/** What `deflateStreams` touches of PDFKit's indirect objects. */
interface Reference {
  compress: boolean;
  buffer: Uint8Array[];
  readonly data: Record<string, unknown>;
  finalize(): void;
}

/**
 * Has `doc` deflate at `LEVEL` every stream PDFKit would deflate at its own: PDFKit decides per object, when it
 * makes one (not when the document does not compress, nor when the object has a filter of its own) and after
 * (the XMP metadata, which PDF/A wants readable, is set not to). Its decision is kept, and carried out here as the
 * object is written out. Objects made before this is called are deflated by PDFKit, at its level.
 */
export function deflateStreams(doc: Doc): void {
  const reference = doc.ref.bind(doc);
  doc.ref = ((data?: Record<string, unknown>) => {
    const made = reference(data ?? {}) as unknown as Reference;
    let deflate = made.compress;
    // PDFKit reads `compress` as it writes (to name the filter) and as it finalizes (to deflate): it sees false
    Object.defineProperty(made, 'compress', {
      get: () => false,
      set: (value: boolean) => void (deflate = value),
      configurable: true,
    });
    const finalize = made.finalize.bind(made);
    made.finalize = () => {
      if (deflate && made.buffer.length) {
        const [only] = made.buffer;
        made.buffer = [made.buffer.length === 1 && only ? deflateOnce(only) : deflateSync(Buffer.concat(made.buffer), { level: LEVEL })];
        made.data.Filter = 'FlateDecode';
      }
      finalize();
    };
    return made;
  }) as unknown as Doc['ref'];
}
