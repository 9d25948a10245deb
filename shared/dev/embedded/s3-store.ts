import { createHash, randomUUID } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, writeFile, type FileHandle } from 'node:fs/promises';
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
  existsObject(bucket: string, key: string): Promise<boolean>;
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
 * If the metadata or the rename fails, the MD5 and metadata the key had are put back (or removed, for a new
 * key): the object in place keeps its own ETag and type. A DELETE removes a folder its key leaves empty, which
 * a PUT to another key of that folder may have just made: the PUT makes it again, and the DELETE, its object
 * gone, does not fail on the folder. s3rver's `copyObject` is left as it is: nothing of the service copies, and
 * a copy must be signed with the server's credentials (`s3.ts`).
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
  store.deleteObject = (bucket, key) =>
    turn(bucket, key, () =>
      deleteObject(bucket, key).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOTEMPTY') throw error; // the object is gone; another key's file is in its folder now
      }),
    );
  store.putObject = async ({ bucket, key, content, metadata }) => {
    const objectPath = store.getResourcePath(bucket, key, 'object');
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
      const file = await create(partial);
      await pipeline(Buffer.isBuffer(content) ? Readable.from([content]) : content, measure, file.createWriteStream());
      const digest = md5.digest('hex');
      await turn(bucket, key, async () => {
        if (options.writeOnce(bucket, key) && (await store.existsObject(bucket, key))) throw options.refusal();
        const described = ['object.md5', 'metadata.json'].map((resource) => store.getResourcePath(bucket, key, resource));
        const before = await Promise.all(described.map((file) => readFile(file).catch(absent)));
        try {
          await store.putMetadata(bucket, key, metadata, digest);
          await rename(partial, objectPath);
        } catch (error) {
          await Promise.all(described.map((file, i) => (before[i] ? writeFile(file, before[i]) : rm(file, { force: true }))));
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

/** A new file, and its folder: made again if a DELETE removed it meanwhile (it removes a folder it leaves empty). */
async function create(file: string): Promise<FileHandle> {
  for (let attempt = 1; ; attempt++) {
    await mkdir(path.dirname(file), { recursive: true });
    try {
      return await open(file, 'wx');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || attempt === 3) throw error;
    }
  }
}

const absent = (error: NodeJS.ErrnoException): undefined => {
  if (error.code === 'ENOENT') return undefined;
  throw error;
};
