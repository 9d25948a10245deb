import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** What `consistentStore` uses of s3rver's filesystem store (s3rver 3, lib/stores/filesystem.js). */
export interface FilesystemStore {
  getResourcePath(bucket: string, key: string, resource: string): string;
  putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5: string): Promise<void>;
  putObject(object: { bucket: string; key: string; content: Buffer | Readable; metadata: Record<string, string> }): Promise<{
    size: number;
    md5: string;
  }>;
  getObject(bucket: string, key: string, options?: { start?: number; end?: number }): Promise<unknown>;
  deleteObject(bucket: string, key: string): Promise<void>;
}

/**
 * One operation at a time per key, in the order asked; one that fails does not stop the next. Hand-written
 * rather than a mutex library: a promise chain per key is all it takes, in a development server's one process.
 */
export class KeyQueue {
  private readonly queues = new Map<string, { tail: Promise<unknown>; length: number }>();

  run<T>(id: string, operation: () => Promise<T>): Promise<T> {
    const queue = this.queues.get(id) ?? { tail: Promise.resolve(), length: 0 };
    this.queues.set(id, queue);
    queue.length++;
    const result = queue.tail.then(operation);
    queue.tail = result
      .catch(() => undefined)
      .then(() => {
        if (--queue.length === 0) this.queues.delete(id);
      });
    return result;
  }

  /** Operations on the key running or waiting their turn. */
  length(id: string): number {
    return this.queues.get(id)?.length ?? 0;
  }
}

/**
 * S3 is read-after-write consistent: once a PUT has answered, a GET returns the new bytes, and a GET during
 * the PUT returns the old object or the new one, never a part, nor one's bytes under the other's ETag. s3rver's
 * store answers a PUT before its write stream has flushed, after truncating the old object, and a GET reads the
 * size (a stat), the ETag and the metadata (files of their own) and then the bytes, each on its own (a CI run's
 * certificate test read a PDF of zero bytes). Here:
 *
 * - a PUT streams its bytes to a temporary file (never listed: not `._S3rver_object`), then, its key's turn
 *   come, writes the MD5 and metadata and renames the file into place, before it answers;
 * - a GET (and HEAD) reads the size, ETag and metadata and opens the file in its key's turn, so what it sends
 *   is one object's, whatever is renamed over the name once the file is open; a DELETE takes its turn too;
 * - a key `writeOnce` names refuses, in its turn, a PUT that finds the object there: two PUTs racing through
 *   one upload URL store one object, as a bucket with a write-once rule does (the request's own check, before
 *   the body arrives, cannot see a PUT still streaming).
 *
 * If the metadata or the rename fails, the stored MD5 is removed: s3rver then computes the ETag from the bytes
 * in place.
 */
export function consistentStore(
  store: FilesystemStore,
  options: {
    readonly writeOnce: (bucket: string, key: string) => boolean;
    /** The error a refused write throws: s3rver's own, which it answers with S3's status and code. */
    readonly refusal: () => Error;
  },
  turns = new KeyQueue(),
): KeyQueue {
  const turn = <T>(bucket: string, key: string, operation: () => Promise<T>) => turns.run(`${bucket}/${key}`, operation);
  const getObject = store.getObject.bind(store);
  const deleteObject = store.deleteObject.bind(store);
  store.getObject = (bucket, key, range) => turn(bucket, key, () => getObject(bucket, key, range));
  store.deleteObject = (bucket, key) => turn(bucket, key, () => deleteObject(bucket, key));
  store.putObject = async ({ bucket, key, content, metadata }) => {
    const objectPath = store.getResourcePath(bucket, key, 'object');
    await mkdir(path.dirname(objectPath), { recursive: true });
    const partial = `${objectPath}.${randomUUID()}.partial`;
    const md5 = createHash('md5');
    let size = 0;
    const measure = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        md5.update(chunk);
        size += chunk.length;
        done(null, chunk);
      },
    });
    try {
      await pipeline(Buffer.isBuffer(content) ? Readable.from([content]) : content, measure, createWriteStream(partial));
      const digest = md5.digest('hex');
      await turn(bucket, key, async () => {
        if (options.writeOnce(bucket, key) && (await exists(objectPath))) throw options.refusal();
        try {
          await store.putMetadata(bucket, key, metadata, digest);
          await rename(partial, objectPath);
        } catch (error) {
          await rm(store.getResourcePath(bucket, key, 'object.md5'), { force: true });
          throw error;
        }
      });
      return { size, md5: digest };
    } finally {
      await rm(partial, { force: true });
    }
  };
  return turns;
}

const exists = (file: string) =>
  stat(file).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return false;
      throw error;
    },
  );
