import { expect } from 'chai';
import os from 'node:os';
import path from 'node:path';
import { promises as fs } from 'node:fs';
import { Client } from 'pg';
import { closedToOthers, startEmbeddedPostgres } from '../../shared/dev/embedded/postgres';
import { startPrivateRedis } from '../../shared/dev/embedded/redis';
import { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { createStorage } from '../../shared/storage/s3';
import { testServices } from '../helpers/services';

/** The fallbacks a fresh machine without local servers relies on (`npm run dev`, `npm test`). */
describe('embedded defaults', function () {
  this.timeout(120_000);

  it('starts real PostgreSQL binaries from npm when no server is reachable, and stops them', async function () {
    const blocked = process.getuid?.() === 0 ? await closedToOthers(__dirname) : undefined;
    if (blocked) {
      // Nothing can run it from here (see the error below); say so rather than pass or fail silently.
      await startEmbeddedPostgres(os.tmpdir()).then(
        () => expect.fail('should refuse'),
        (err: Error) => expect(err.message).to.include('cannot enter'),
      );
      process.stdout.write(`      skipped the start itself: ${blocked} is closed to the postgres user\n`);
      this.skip();
    }
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'works-epg-'));
    const pg = await startEmbeddedPostgres(dir);
    try {
      expect(pg.source).to.equal('embedded');
      const client = new Client({ connectionString: `${pg.serverUrl}/postgres` });
      await client.connect();
      const { rows } = await client.query('select gen_random_uuid() as id, version() as v');
      await client.end();
      expect(rows[0].v).to.match(/^PostgreSQL \d+/);
    } finally {
      await pg.stop();
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('starts a private redis-server from PATH, which answers and then goes away', async () => {
    const redis = await startPrivateRedis();
    const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => undefined);
    await client.connect();
    expect(await client.ping()).to.equal('PONG');
    client.disconnect();
    await redis.stop();
    const probe = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => undefined);
    let refused = false;
    await probe.connect().catch(() => (refused = true));
    probe.disconnect();
    expect(refused).to.equal(true);
  });

  it('the embedded S3 refuses what is not signed with its credentials, as S3 does: GET, PUT, DELETE, list', async () => {
    const { config } = testServices();
    const storage = createStorage(config.s3);
    try {
      const key = `audio/${randomUUID()}/${randomUUID()}`;
      await storage.client.send(new PutObjectCommand({ Bucket: storage.bucket, Key: key, Body: Buffer.from('anchored audio') }));
      const base = `${config.s3.endpoint}/${storage.bucket}`;
      for (const [method, path] of [
        ['GET', `/${key}`],
        ['PUT', `/${key}`],
        ['DELETE', `/${key}`],
        ['GET', '/?prefix=audio/'],
        ['GET', '?list-type=2'],
      ] as const) {
        const reply = await fetch(base + path, { method, body: method === 'PUT' ? 'replaced' : undefined });
        expect(reply.status, `${method} ${path}`).to.equal(403);
        expect(await reply.text()).to.include('AccessDenied');
      }
      // a signature made with other credentials is refused too
      const forged = new S3Client({
        endpoint: config.s3.endpoint,
        region: config.s3.region,
        forcePathStyle: true,
        credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'not-the-secret' },
      });
      const error = await forged.send(new GetObjectCommand({ Bucket: storage.bucket, Key: key })).catch((err: { name: string }) => err);
      expect((error as { name: string }).name).to.equal('SignatureDoesNotMatch');
      forged.destroy();
      // the service's own signed requests still work, and nothing was replaced or deleted
      const object = await storage.client.send(new GetObjectCommand({ Bucket: storage.bucket, Key: key }));
      expect(await object.Body!.transformToString()).to.equal('anchored audio');
    } finally {
      storage.client.destroy();
    }
  });
});
