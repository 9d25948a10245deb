import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createRedis, type Redis } from '../../shared/redis/client';
import { testServices } from '../helpers/services';

/**
 * The web's connection to one Redis server (redis/client.ts): the commands of one turn of the event loop leave
 * in one write, and each is answered as its own reply arrives, not when the others of its turn are.
 */
describe("redis client: the web's commands of a turn in one write, each answered by itself", () => {
  const clients: Redis[] = [];
  const open = async (profile: 'web' | 'worker') => {
    const client = createRedis(testServices().config.redis, profile, `redis-client-test-${profile}`);
    clients.push(client);
    // the web's connection queues nothing before it is ready (a refused connect is retried, not thrown here)
    if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
    return client;
  };
  afterEach(() => {
    for (const client of clients.splice(0)) client.disconnect();
  });

  /** The writes the client's socket hands to the kernel while `run` runs, each as the number of chunks it carried. */
  async function writesOf<T>(client: Redis, run: () => Promise<T>): Promise<{ result: T; writes: number[] }> {
    const socket = (client as Extract<Redis, { stream: unknown }>).stream as unknown as {
      _write: (...args: unknown[]) => void;
      _writev: (chunks: unknown[], ...rest: unknown[]) => void;
    };
    const writes: number[] = [];
    const { _write: write, _writev: writev } = socket;
    socket._write = function (this: unknown, ...args: unknown[]) {
      writes.push(1);
      return write.apply(this, args);
    };
    socket._writev = function (this: unknown, chunks: unknown[], ...rest: unknown[]) {
      writes.push(chunks.length);
      return writev.call(this, chunks, ...rest);
    };
    try {
      return { result: await run(), writes };
    } finally {
      socket._write = write;
      socket._writev = writev;
    }
  }

  it('sends the 20 commands one turn issues in one write, and answers each', async () => {
    const web = await open('web');
    const key = `redis-client-test:${randomUUID()}`;
    await web.set(key, 'v', 'EX', 60);
    const { result, writes } = await writesOf(web, () => Promise.all(Array.from({ length: 20 }, () => web.get(key))));
    expect(result).to.deep.equal(Array(20).fill('v'));
    // one write of the 20 commands, each its own chunk as it was issued (auto-pipelining wrote one buffer: [1])
    expect(writes).to.deep.equal([20]);
  });

  it('writes a worker connection’s commands one by one (nothing batched where it was not asked for)', async () => {
    const worker = await open('worker');
    const key = `redis-client-test:${randomUUID()}`;
    const { writes } = await writesOf(worker, () => Promise.all(Array.from({ length: 5 }, () => worker.get(key))));
    expect(writes.reduce((sum, n) => sum + n, 0)).to.equal(5);
    expect(writes.length).to.be.greaterThan(1);
  });

  it('answers a command without waiting for a slower one sent in the same turn', async () => {
    const web = await open('web');
    const key = `redis-client-test:${randomUUID()}`;
    await web.set(key, 'v', 'EX', 60);
    const answered: string[] = [];
    // GET first, then a BLPOP that waits on an empty list: Redis answers the GET at once and the BLPOP only when
    // its wait is over; the GET's answer is not held until the BLPOP's arrives (as an auto-pipelined batch's is)
    const get = web.get(key).then((value) => answered.push(`get ${value}`));
    const blpop = web.blpop(`${key}:empty`, 0.3).then((value) => answered.push(`blpop ${value}`));
    await get;
    expect(answered).to.deep.equal(['get v']);
    await blpop;
    expect(answered).to.deep.equal(['get v', 'blpop null']);
  });
});
