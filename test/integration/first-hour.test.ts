import path from 'node:path';
import os from 'node:os';
import { promises as fs } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { devRunnerEnv, runExample, startDev, type DevRunner } from '../helpers/dev-runner';
import { parseEnvFile, type Env } from '../../shared/config';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');

/** What `npm run dev` prints before its last banner line that is not ours: only npm's own header may be there. */
function noise(banner: string): string[] {
  return banner.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('[dev] ') && !line.startsWith('> '));
}

/**
 * A newcomer's first hour (issue 24): a fresh clone of this branch's committed state, its node_modules borrowed
 * from this checkout (the test is about the repository's files and commands, not the registry), then what the
 * README says: `npm run dev`, a quiet start whose first lines say where everything is and how to get into Bull
 * Board, `npm run example` against it, Ctrl-C, the same again on the same `.data`.
 */
describe("a fresh clone's first hour", function () {
  this.timeout(300_000);
  let clone: string;
  let env: Env;
  let drop: () => Promise<void>;

  before(async () => {
    clone = await fs.mkdtemp(path.join(os.tmpdir(), 'works-clone-'));
    await run('git', ['clone', '--quiet', ROOT, clone]);
    for (const dir of ['node_modules', 'sdk/node_modules', 'tools/lint/node_modules']) {
      const installed = await fs.realpath(path.join(ROOT, dir)).catch(() => undefined);
      if (installed) await fs.symlink(installed, path.join(clone, dir));
    }
    // PostgreSQL and Redis as the harness found them (a database and a key prefix of this test's own); S3, the
    // chain and the identity provider are the runner's own, under the clone's .data/
    ({ env, drop } = await devRunnerEnv('firsthour'));
  });
  after(async () => {
    await drop?.();
    if (process.env.KEEP_DEV_LOG) process.stdout.write(`clone and runner log: ${clone}\n`);
    else await fs.rm(clone, { recursive: true, force: true });
  });

  /** `npm run dev` in the clone, up to the last line of its banner; what it printed, and the operator credential. */
  async function start(): Promise<{ dev: DevRunner; banner: string; user: string; password: string }> {
    const dev = await startDev({ cwd: clone, env, viaNpm: true, logFile: path.join(clone, 'runner.log') });
    await dev.printed(/^\[dev\] {3}npm run --silent admin -- org create .*$/m);
    const banner = dev.output();
    const board = /^\[dev\] {3}Bull Board: +(\S+), user (\S+), password (\S+) \(development credential, kept in \.data\/dev\.env\)$/m.exec(
      banner,
    );
    expect(board, banner).to.not.equal(null);
    expect(board![1]).to.equal(`${dev.url}/admin/queues`);
    return { dev, banner, user: board![2]!, password: board![3]! };
  }

  /** `npm run example -- --base-url …` from the clone, in the same shell as the runner. */
  async function example(url: string): Promise<string> {
    const result = await runExample(['--base-url', url], { cwd: clone, env, viaNpm: true, timeoutMs: 120_000 });
    expect(result.code, result.stdout + result.stderr).to.equal(0);
    expect(result.stdout).to.include('transaction finalized').and.include('signature valid');
    return result.stdout;
  }

  it('starts quietly, says where everything is, runs the example, and keeps its operator credential across a restart', async () => {
    // Ctrl-C (stop) stops everything it started and exits 0; checked after the rest, so as not to hide a failure
    const exits: (number | null)[] = [];
    const first = await start();
    try {
      const { dev, banner } = first;
      expect(noise(banner), banner).to.deep.equal([]);
      expect(banner).to.not.match(/multiple versions|MetadataApi|NodeVersionSupportWarning|AWS SDK/);
      // one line per dependency, saying what was found or started, and where
      expect(banner).to.match(/^\[dev\] PostgreSQL: DATABASE_URL, 127\.0\.0\.1:\d+\/works_firsthour_/m);
      expect(banner).to.match(/^\[dev\] Redis: REDIS_URL, [\w.-]+:\d+$/m);
      expect(banner).to.match(/^\[dev\] S3: s3rver started at http:\/\/127\.0\.0\.1:\d+ \(data in \.data\/s3\), bucket works$/m);
      expect(banner).to.match(
        /^\[dev\] Chain \(testnet\): chopsticks started at ws:\/\/127\.0\.0\.1:\d+, running Rococo Asset Hub, a block every 300 ms$/m,
      );
      expect(banner).to.match(/^\[dev\] Identity provider: development key in \.data\/idp-key\.json/m);
      expect(banner).to.include(`[dev] works-api is up at http://127.0.0.1:${env.PORT} `);
      expect(banner).to.include(`[dev]   API reference: ${dev.url}/docs\n`);

      // the printed links work: the reference page, and Bull Board with the printed credential (without it: 401)
      expect((await fetch(`${dev.url}/docs`)).status).to.equal(200);
      expect((await fetch(`${dev.url}/admin/queues`)).status).to.equal(401);
      const basic = `Basic ${Buffer.from(`${first.user}:${first.password}`).toString('base64')}`;
      const board = await fetch(`${dev.url}/admin/queues`, { headers: { Authorization: basic } });
      expect(board.status).to.equal(200);
      expect(board.headers.get('content-type')).to.match(/^text\/html/);
      expect(await board.text()).to.match(/<title>[^<]+<\/title>/);

      // kept in .data/dev.env, which git ignores: the clone stays clean
      const devEnv = parseEnvFile(await fs.readFile(path.join(clone, '.data/dev.env'), 'utf8'));
      expect(devEnv.OPERATOR_CREDENTIAL).to.equal(`${first.user}:${first.password}`);
      expect((await run('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: clone })).stdout).to.equal('');

      await example(dev.url);
      // logs to a pipe stay JSON lines, one per request
      const logged = dev
        .output()
        .slice(banner.length)
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { msg: string });
      expect(logged.filter((line) => line.msg === 'request').length).to.be.greaterThan(5);
    } finally {
      exits.push(await first.dev.stop());
    }

    const second = await start();
    try {
      expect(noise(second.banner), second.banner).to.deep.equal([]);
      expect(second.banner).to.match(/^\[dev\] database up to date$/m);
      expect(`${second.user}:${second.password}`).to.equal(`${first.user}:${first.password}`);
      await example(second.dev.url);
    } finally {
      exits.push(await second.dev.stop());
    }
    expect(exits, 'exit codes after Ctrl-C').to.deep.equal([0, 0]);
    const all = first.dev.output() + second.dev.output();
    expect(all).to.not.match(/multiple versions|MetadataApi|NodeVersionSupportWarning/);
  });
});
