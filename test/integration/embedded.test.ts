import { expect } from 'chai';
import os from 'node:os';
import path from 'node:path';
import { promises as fs } from 'node:fs';
import { Client } from 'pg';
import { closedToOthers, startEmbeddedPostgres } from '../../shared/embedded/postgres';
import { startPrivateRedis } from '../../shared/embedded/redis';
import { Redis } from 'ioredis';

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
});
