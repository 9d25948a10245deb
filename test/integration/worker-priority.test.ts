import { expect } from 'chai';
import os from 'node:os';
import path from 'node:path';
import { closeSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { eventually } from '../helpers/app';
import { testServices } from '../helpers/services';
import { spawnWorker } from '../helpers/workers';

/** The nice value of every thread of a process (field 19 of /proc/<pid>/task/<tid>/stat, after the command's parentheses). */
function niceOfThreads(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  });
}

/**
 * A worker process that runs only background queues (certificates) lowers its CPU priority, every thread of it,
 * so that on a shared machine it takes what the waited-on paths leave; one that also runs another queue does not.
 */
describe('worker processes: background queues at a lower CPU priority', function () {
  this.timeout(120_000);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'works-priority-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** Starts a worker for `queues`, waits until it says it has started, and returns its threads' nice values. */
  async function niceOf(queues: string, env: Record<string, string> = {}): Promise<{ nices: number[]; log: string }> {
    const file = path.join(dir, `${queues}-${Object.keys(env).join()}.log`);
    const fd = openSync(file, 'w');
    const worker = spawnWorker(
      {
        ...testServices().env,
        REDIS_PREFIX: `priority_${Date.now().toString(36)}`,
        LOG_LEVEL: 'info',
        WORKER_QUEUES: queues,
        ...env,
      },
      [],
      fd,
    );
    try {
      await eventually(
        async () => (readFileSync(file, 'utf8').includes('worker started') ? true : undefined),
        `the ${queues} worker to start`,
      );
      return { nices: niceOfThreads(worker.pid), log: readFileSync(file, 'utf8') };
    } finally {
      worker.kill('SIGTERM');
      await worker.exited;
      closeSync(fd);
    }
  }

  before(function () {
    if (process.platform !== 'linux') this.skip(); // /proc
  });

  it('certificates alone: every thread at WORKER_BACKGROUND_NICE (10 by default), and the log says so', async () => {
    const { nices, log } = await niceOf('certificates');
    expect(nices.length).to.be.above(1);
    expect(new Set(nices)).to.deep.equal(new Set([10]));
    expect(log).to.include('CPU priority lowered');
    expect((await niceOf('certificates', { WORKER_BACKGROUND_NICE: '15' })).nices).to.satisfy((n: number[]) => n.every((v) => v === 15));
  });

  it('certificates with a waited-on queue, or WORKER_BACKGROUND_NICE=0: the priority it was started with', async () => {
    const own = os.getPriority();
    for (const [queues, env] of [
      ['certificates,webhooks', {}],
      ['certificates', { WORKER_BACKGROUND_NICE: '0' }],
    ] as const) {
      const { nices, log } = await niceOf(queues, env);
      expect(new Set(nices), queues).to.deep.equal(new Set([own]));
      expect(log).to.not.include('CPU priority lowered');
    }
  });
});
