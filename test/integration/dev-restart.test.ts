import path from 'node:path';
import os from 'node:os';
import { promises as fs } from 'node:fs';
import { expect } from 'chai';
import { call, eventually, testLogger } from '../helpers/app';
import { createOrg, createKey } from '../helpers/factories';
import { register } from '../helpers/registration';
import { loadConfig, parseEnvFile, type Env } from '../../shared/config';
import { openResources } from '../../shared/resources';
import { devRunnerEnv, startDev } from '../helpers/dev-runner';

/**
 * `npm run dev` stopped with Ctrl-C and started again (issue 17): the embedded chain starts afresh while the
 * database keeps the relayer's submissions, and registrations still land. The real runner, as a child
 * process, on a data directory, database and Redis prefix of its own.
 */
describe('npm run dev, stopped and started again', function () {
  this.timeout(300_000);
  let dataDir: string;
  let env: Env;
  let drop: () => Promise<void>;

  before(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'works-dev-'));
    ({ env, drop } = await devRunnerEnv('devrestart', { DEV_DATA_DIR: dataDir, LOG_LEVEL: 'warn' }));
  });
  after(async () => {
    await drop?.();
    if (process.env.KEEP_DEV_LOG) process.stdout.write(`runner log: ${dataDir}/runner.log\n`);
    else await fs.rm(dataDir, { recursive: true, force: true });
  });

  const startRunner = () => startDev({ env, logFile: path.join(dataDir, 'runner.log') });

  it('registers before and after the restart; nothing is refunded', async () => {
    const first = await startRunner();
    const config = loadConfig({
      ...parseEnvFile(await fs.readFile(path.join(dataDir, 'dev.env'), 'utf8')),
      ...env,
      NODE_ENV: 'development',
    });
    const ctx = openResources(config, testLogger(), 'web');
    try {
      const org = await createOrg(ctx, 10_000);
      const key = await createKey(ctx, org);
      const finalized = (url: string, txId: string) =>
        eventually(
          async () => {
            const status = await call(url, 'GET', `/v1/transactions/${txId}`, { token: key.token });
            if (status.body.status === 'failed') throw new Error(`failed: ${JSON.stringify(status.body.result)}`);
            return status.body.status === 'finalized' ? status.body : undefined;
          },
          `transaction ${txId} to finalize`,
          120_000,
        );

      // enough traffic that the relayer's nonce moves on, then Ctrl-C
      const before = await Promise.all(
        [1, 2, 3].map(async () => (await register(first.url, key.token)).confirm.body.transaction_id as string),
      );
      for (const id of before) await finalized(first.url, id);
      await first.stop();

      const second = await startRunner();
      try {
        const after = await Promise.all(
          [1, 2, 3].map(async () => (await register(second.url, key.token)).confirm.body.transaction_id as string),
        );
        for (const id of after) await finalized(second.url, id);
      } finally {
        await second.stop();
      }
      const ledger = await ctx.db('credit_ledger').where({ organization_id: org }).pluck('kind');
      expect(ledger.filter((k) => k === 'debit')).to.have.length(6);
      expect(ledger.filter((k) => k === 'refund')).to.have.length(0);
    } finally {
      await ctx.close();
    }
  });
});
