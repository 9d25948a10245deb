import { expect } from 'chai';
import os from 'node:os';
import path from 'node:path';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import S3rver from 's3rver';
import S3Error from 's3rver/lib/models/error.js';
import { consistentStore, type FilesystemStore, type KeyQueue } from '../../shared/dev/embedded/s3-store';

/** What a test reads of s3rver's answer to a GET: the object's metadata and its bytes. */
interface Stored {
  readonly metadata: { readonly etag: string; readonly 'content-length': number; readonly 'content-type': string };
  readonly content: Readable;
}

const md5 = (bytes: Buffer) => JSON.stringify(createHash('md5').update(bytes).digest('hex'));

/**
 * The embedded S3's store (shared/dev/embedded/s3-store.ts) on s3rver's own filesystem store, called as s3rver's
 * controllers call it: what a GET answers is one object's bytes, size and ETag whatever PUT runs beside it, and a
 * write-once key keeps the first object stored.
 */
describe('embedded S3 store: read-after-write, one object per answer, write-once keys', () => {
  const bucket = 'store-test';
  let dir: string;
  let store: FilesystemStore & { putBucket(name: string): Promise<void>; existsObject(b: string, k: string): Promise<boolean> };
  let turns: KeyQueue;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'works-s3-store-'));
    store = new S3rver({ directory: dir, silent: true }).context.store as typeof store;
    await store.putBucket(bucket);
    turns = consistentStore(store, {
      writeOnce: (_bucket, key) => key.startsWith('once/'),
      refusal: () => new S3Error('PreconditionFailed', 'written once'),
    });
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  const put = (key: string, content: Buffer) => store.putObject({ bucket, key, content, metadata: { 'content-type': 'application/pdf' } });
  const get = async (key: string) => {
    const stored = (await store.getObject(bucket, key)) as Stored | null;
    if (!stored) return undefined;
    const chunks: Buffer[] = [];
    for await (const chunk of stored.content) chunks.push(chunk as Buffer);
    const { etag, 'content-type': type } = stored.metadata;
    return { bytes: Buffer.concat(chunks), etag, type, size: Number(stored.metadata['content-length']) };
  };
  /** Resolves once `settled` has, or `ready()` holds, checked at each turn of the event loop. */
  const until = async (ready: () => boolean, settled: Promise<unknown>) => {
    let done = false;
    void settled.finally(() => (done = true)).catch(() => undefined);
    while (!done && !ready()) await new Promise((resolve) => setImmediate(resolve));
  };

  it('a GET that arrives while a PUT writes its ETag waits for the rename: the old object is never sent under the new ETag', async () => {
    const key = `pdf/${randomUUID()}`;
    const old = randomBytes(64 * 1024);
    const replacement = randomBytes(64 * 1024 + 1);
    await put(key, old);
    // hold the PUT between its metadata and its rename, the window a GET could read across
    const original = store.putMetadata.bind(store);
    let reached!: () => void;
    let release!: () => void;
    const inWindow = new Promise<void>((resolve) => (reached = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    store.putMetadata = async (...args) => {
      await original(...args);
      reached();
      await released;
    };
    const putting = put(key, replacement);
    await inWindow;
    const reading = get(key);
    // the GET has either answered inside the window (what must not happen) or is waiting its turn behind the PUT
    await until(() => turns.length(`${bucket}/${key}`) === 2, reading);
    release();
    const [seen] = await Promise.all([reading, putting]);
    expect(seen!.bytes.equals(replacement), 'the object stored by the PUT').to.equal(true);
    expect(seen!.size).to.equal(seen!.bytes.length);
    expect(seen!.etag).to.equal(md5(seen!.bytes));
  });

  it('every GET racing a run of overwrites answers one whole object, its size and ETag its own', async () => {
    const key = `pdf/${randomUUID()}`;
    let writing = true;
    const seen: NonNullable<Awaited<ReturnType<typeof get>>>[] = [];
    const failures: unknown[] = [];
    await put(key, randomBytes(1000));
    const reader = async () => {
      while (writing) {
        try {
          seen.push((await get(key))!);
        } catch (err) {
          failures.push(err); // s3rver read a half-written metadata file, or a file gone between its stat and its open
        }
      }
    };
    const readers = [reader(), reader(), reader()];
    for (let round = 0; round < 40; round++) await put(key, randomBytes(32 * 1024 + round * 97));
    writing = false;
    await Promise.all(readers);
    expect(failures).to.deep.equal([]);
    expect(seen.length).to.be.greaterThan(0);
    for (const { bytes, size, etag } of seen) {
      expect(size).to.equal(bytes.length);
      expect(etag).to.equal(md5(bytes));
    }
  });

  it('two PUTs racing to a write-once key: one is stored, the other refused, and the object is the stored one', async () => {
    const key = `once/${randomUUID()}`;
    const bodies = [randomBytes(256 * 1024), randomBytes(256 * 1024)];
    const outcomes = await Promise.allSettled(bodies.map((body) => put(key, body)));
    const stored = outcomes.findIndex((o) => o.status === 'fulfilled');
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(stored).to.not.equal(-1);
    expect(refused).to.have.length(1);
    expect(refused[0]!.reason).to.be.instanceOf(S3Error);
    expect((refused[0]!.reason as S3Error).status).to.equal(412);
    const seen = await get(key);
    expect(seen!.bytes.equals(bodies[stored]!)).to.equal(true);
    expect(seen!.etag).to.equal(md5(bodies[stored]!));
    // a key not named write-once is replaced as S3 replaces it
    const other = `pdf/${randomUUID()}`;
    await put(other, bodies[0]!);
    await put(other, bodies[1]!);
    expect((await get(other))!.bytes.equals(bodies[1]!)).to.equal(true);
  });

  it('a PUT whose commit fails leaves the object in place with the ETag of its own bytes, and no temporary file', async () => {
    const key = `pdf/${randomUUID()}`;
    const old = randomBytes(10_000);
    await put(key, old);
    const original = store.putMetadata.bind(store);
    // the new MD5 and metadata written, then the commit fails
    store.putMetadata = async (b, k, metadata, digest) => {
      await original(b, k, metadata, digest);
      throw new Error('disk full');
    };
    const failed = await store.putObject({ bucket, key, content: randomBytes(10_000), metadata: { 'content-type': 'image/png' } }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(failed?.message).to.equal('disk full');
    const seen = await get(key);
    expect(seen!.bytes.equals(old)).to.equal(true);
    expect(seen!.etag).to.equal(md5(old));
    expect(seen!.type, 'the type the object was stored with').to.equal('application/pdf');
    const files = await readdir(path.join(dir, bucket, 'pdf'));
    expect(files.filter((f) => f.endsWith('.partial'))).to.deep.equal([]);
  });
});
