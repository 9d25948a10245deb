import { expect } from 'chai';
import { QueueEvents } from 'bullmq';
import { openResources, type Resources } from '../../shared/resources';
import { bullPrefix } from '../../shared/redis/settings';
import { startWorkers } from '../../jobs/workers';
import { keepMaintenanceScheduled } from '../../jobs/maintenance/processor';
import { configWith } from '../helpers/services';
import { eventually, logsFromNow, testLogger } from '../helpers/app';
import { createRedis } from '../../shared/redis/client';

describe('workers', () => {
  let ctx: Resources;
  beforeEach(() => {
    // a key space of this test's own, so no other worker takes its jobs
    ctx = openResources(configWith({ REDIS_PREFIX: `workers_${Date.now()}_${Math.random().toString(36).slice(2)}` }), testLogger(), 'dev');
  });
  afterEach(() => ctx.close());

  it('run only the queues they are given, and finish the active job before stopping', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const seen: string[] = [];
    const workers = startWorkers(ctx, ['maintenance'], {
      maintenance: () => async (job) => {
        seen.push(job.name);
        started();
        await gate;
        return 'done';
      },
    });
    const events = new QueueEvents('maintenance', {
      connection: createRedis(ctx.config.redis, 'worker', 'workers-test-events'),
      prefix: bullPrefix(ctx.config.redis, 'maintenance'),
    });
    await events.waitUntilReady();
    const job = await ctx.queues.maintenance.add('slow', { id: 1 });
    await running;
    const stopping = workers.stop(30_000);
    let stopped = false;
    void stopping.then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    expect(stopped, 'stop waits for the active job').to.equal(false);
    release();
    await stopping;
    expect(await job.getState()).to.equal('completed');
    expect(seen).to.deep.equal(['slow']);
    await events.close();
  });

  it('wait on stopping for the work a processor carries on after its jobs (the relayer submitter’s round)', async () => {
    let finishRound!: () => void;
    const round = new Promise<void>((resolve) => (finishRound = resolve));
    let settled = false;
    let asked!: () => void;
    const settling = new Promise<void>((resolve) => (asked = resolve));
    const workers = startWorkers(ctx, ['maintenance'], {
      maintenance: () => ({
        process: async () => 'done',
        settle: () => {
          asked();
          return round.then(() => void (settled = true));
        },
      }),
    });
    const job = await ctx.queues.maintenance.add('quick', {});
    await new Promise<void>((resolve) => workers.workers[0]!.once('completed', () => resolve()));
    let stopped = false;
    const stopping = workers.stop(30_000).then(() => (stopped = true));
    await settling;
    await new Promise((r) => setImmediate(r));
    expect(stopped, 'stop waits for the round').to.equal(false);
    finishRound();
    await stopping;
    expect(settled).to.equal(true);
    expect(await job.getState()).to.equal('completed');
  });

  it('release a job that outlives the grace period so another worker can take it', async () => {
    const workers = startWorkers(ctx, ['maintenance'], {
      maintenance: () => () => new Promise(() => undefined), // never finishes
    });
    const job = await ctx.queues.maintenance.add('stuck', {});
    await new Promise<void>((resolve) => workers.workers[0]!.once('active', () => resolve()));
    await workers.stop(50);
    const state = await job.getState();
    expect(state).to.not.equal('completed');
    expect(['active', 'waiting', 'failed']).to.include(state);
  });

  it('refuse a queue without a processor', () => {
    expect(() => startWorkers(ctx, ['webhooks'], {})).to.throw(/no processor is registered for queue "webhooks"/);
  });
});

describe('a wedged worker', () => {
  let ctx: Resources;
  beforeEach(() => {
    ctx = openResources(
      configWith({
        REDIS_PREFIX: `wedged_${Date.now()}_${Math.random().toString(36).slice(2)}`,
        WORKER_LOCK_MS: '1000',
        WORKER_WATCHDOG_MS: '1000',
      }),
      testLogger(),
      'dev',
    );
  });
  afterEach(() => ctx.close());

  it('is replaced once jobs have waited through two checks while it had room and started none', async () => {
    const seen: string[] = [];
    const logs = logsFromNow();
    const running = startWorkers(ctx, ['maintenance'], { maintenance: () => async (job) => void seen.push(job.name) });
    try {
      const [original] = running.workers;
      await original!.waitUntilReady();
      // this worker's own connections (named after its queue; the watch's are named apart)
      const workerConnections = async () =>
        String(await ctx.redis.call('CLIENT', 'LIST'))
          .split('\n')
          .filter((line) => line.includes(`name=works-api:worker:maintenance `)).length;
      const before = await workerConnections();
      expect(before).to.be.greaterThan(0);
      // what BullMQ's worker does when wedged after Redis went away under it: its wait for the next job never
      // ends, and no command is in flight
      let wedged!: () => void;
      const isWedged = new Promise<void>((resolve) => (wedged = resolve));
      (original as unknown as { backend: { waitForJob: () => Promise<never> } }).backend.waitForJob = () => {
        wedged();
        return new Promise<never>(() => {});
      };
      await isWedged;
      await ctx.queues.maintenance.add('waits', {});
      await eventually(async () => (seen.includes('waits') ? true : undefined), 'the job to be run', 20_000);
      expect(running.workers[0]).to.not.equal(original);
      // the wedged worker's connections go once it has closed, or after two lock periods if it never does
      await eventually(
        async () => ((await workerConnections()) === before ? true : undefined),
        'the replaced worker to let go of its connections',
      );
      expect(logs().filter((line) => line.includes('worker started no job while jobs waited and it had room: replaced'))).to.have.length(1);
    } finally {
      await running.stop(1000);
    }
  });

  it('is left alone while its jobs use all its room, however long others wait', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const logs = logsFromNow();
    const running = startWorkers(ctx, ['maintenance'], { maintenance: () => () => gate });
    try {
      const [worker] = running.workers;
      // maintenance runs one job at a time: the first holds it, the second waits through several checks
      await ctx.queues.maintenance.add('holds', {});
      await ctx.queues.maintenance.add('waits', {});
      await eventually(async () => ((await ctx.queues.maintenance.getActiveCount()) === 1 ? true : undefined), 'the first job running');
      const watchedFull = () => logs().filter((line) => line.includes('worker watch: jobs wait while the worker is full')).length;
      await eventually(async () => (watchedFull() >= 3 ? true : undefined), 'three checks of the full worker');
      expect(running.workers[0]).to.equal(worker);
      expect(logs().some((line) => line.includes('replaced'))).to.equal(false);
    } finally {
      release();
      await running.stop(1000);
    }
  });
});

describe('the maintenance schedules', () => {
  let ctx: Resources;
  beforeEach(() => {
    ctx = openResources(
      configWith({ REDIS_PREFIX: `schedules_${Date.now()}_${Math.random().toString(36).slice(2)}`, RECONCILE_EVERY_MS: '1000' }),
      testLogger(),
      'dev',
    );
  });
  afterEach(() => ctx.close());

  it('are put back when one stops: its record kept, its next run lost', async () => {
    const seen: string[] = [];
    const logs = logsFromNow();
    const running = startWorkers(ctx, ['maintenance'], { maintenance: () => async (job) => void seen.push(job.name) });
    const unwatch = await keepMaintenanceScheduled(ctx);
    try {
      const runs = () => seen.filter((name) => name === 'reconcile-transactions').length;
      await eventually(async () => (runs() >= 2 ? true : undefined), 'the reconciler to run twice');
      // what BullMQ leaves when adding a schedule's next run failed: the schedule, and no job to run
      const queue = bullPrefix(ctx.config.redis, 'maintenance');
      const next = (await ctx.queues.maintenance.getDelayed()).filter((job) => job.id!.startsWith('repeat:reconcile-transactions'));
      expect(next).to.have.length(1);
      await ctx.redis.zrem(`${queue}:maintenance:delayed`, next[0]!.id!);
      await ctx.redis.del(`${queue}:maintenance:${next[0]!.id!}`);
      const before = runs();
      await eventually(
        async () => (logs().some((line) => line.includes('maintenance schedule had stopped: put back')) ? true : undefined),
        'the dead schedule to be put back',
      );
      await eventually(async () => (runs() > before ? true : undefined), 'the reconciler to run again');
    } finally {
      unwatch();
      await running.stop(1000);
    }
  });
});
