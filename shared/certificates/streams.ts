import { deflateSync } from 'node:zlib';
import type { Doc } from './fonts';

/**
 * zlib's level for the document's streams. PDFKit deflates every stream at zlib's default, 6, and has no option
 * for another. For a certificate's streams (the page's content, about 50 KB, and four or five font subsets of
 * about 12 KB), level 3 took 0.6 ms less a certificate than level 6 (1.1 against 1.7–1.8 ms) for 4 % more bytes
 * (45.7 against 43.8 KB): zlib's levels 1 to 3 skip its lazy matching.
 */
const LEVEL = 3;

/** What `deflateStreams` touches of PDFKit's indirect objects. */
interface Reference {
  buffer: Uint8Array[];
  readonly data: Record<string, unknown>;
  finalize(): void;
}

/**
 * Has `doc` (made with `compress: false`, so PDFKit deflates nothing itself) deflate each stream at `LEVEL` as
 * PDFKit would have at its own: every stream that has no filter yet, as it is written out.
 */
export function deflateStreams(doc: Doc): void {
  const reference = doc.ref.bind(doc);
  doc.ref = ((data?: Record<string, unknown>) => {
    const made = reference(data ?? {}) as unknown as Reference;
    const finalize = made.finalize.bind(made);
    made.finalize = () => {
      if (made.buffer.length && made.data.Filter === undefined) {
        made.buffer = [deflateSync(Buffer.concat(made.buffer), { level: LEVEL })];
        made.data.Filter = 'FlateDecode';
      }
      finalize();
    };
    return made;
  }) as unknown as Doc['ref'];
}
