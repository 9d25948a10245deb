import { expect } from 'chai';
import { Coalescer } from '../../shared/coalesce';

/** A `run` whose calls finish when the test says, recording what each call was given. */
function controlledRun() {
  const calls: { items: string[]; finish: (err?: Error) => void }[] = [];
  const run = (items: string[]) =>
    new Promise<string[]>((resolve, reject) =>
      calls.push({ items, finish: (err) => (err ? reject(err) : resolve(items.map((i) => i.toUpperCase()))) }),
    );
  return { calls, run };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('batch-while-busy (coalesce: webhook statements, chain quotes)', () => {
  it('runs an item at once when nothing is in flight', async () => {
    const { calls, run } = controlledRun();
    const batcher = new Coalescer(run, { maxBatch: 10, maxInFlight: 1 });
    const a = batcher.submit('a');
    expect(calls.map((c) => c.items)).to.deep.equal([['a']]);
    calls[0]!.finish();
    expect(await a).to.equal('A');
  });

  it('puts what arrives while a call is in flight into the next call, each answered with its own result', async () => {
    const { calls, run } = controlledRun();
    const batcher = new Coalescer(run, { maxBatch: 10, maxInFlight: 1 });
    const first = batcher.submit('a');
    const rest = ['b', 'c', 'd'].map((i) => batcher.submit(i));
    expect(calls).to.have.length(1);
    calls[0]!.finish();
    await first;
    await tick();
    expect(calls.map((c) => c.items)).to.deep.equal([['a'], ['b', 'c', 'd']]);
    calls[1]!.finish();
    expect(await Promise.all(rest)).to.deep.equal(['B', 'C', 'D']);
  });

  it('caps a call at maxBatch items and keeps maxInFlight calls going', async () => {
    const { calls, run } = controlledRun();
    const batcher = new Coalescer(run, { maxBatch: 2, maxInFlight: 2 });
    const all = ['a', 'b', 'c', 'd', 'e'].map((i) => batcher.submit(i));
    expect(calls.map((c) => c.items)).to.deep.equal([['a'], ['b']]);
    calls[0]!.finish();
    await tick();
    expect(calls.map((c) => c.items)).to.deep.equal([['a'], ['b'], ['c', 'd']]);
    calls[1]!.finish();
    await tick();
    expect(calls.map((c) => c.items)).to.deep.equal([['a'], ['b'], ['c', 'd'], ['e']]);
    calls[2]!.finish();
    calls[3]!.finish();
    expect(await Promise.all(all)).to.deep.equal(['A', 'B', 'C', 'D', 'E']);
  });

  it('never puts two items with the same key in one call', async () => {
    const { calls, run } = controlledRun();
    const batcher = new Coalescer(run, { maxBatch: 10, maxInFlight: 1, key: (i: string) => i[0]! });
    const all = ['x1', 'x2', 'y1', 'x3', 'y2'].map((i) => batcher.submit(i));
    calls[0]!.finish();
    await tick();
    calls[1]!.finish();
    await tick();
    calls[2]!.finish();
    await Promise.all(all);
    expect(calls.map((c) => c.items)).to.deep.equal([['x1'], ['x2', 'y1'], ['x3', 'y2']]);
  });

  it('fails every item of a call that fails, and goes on with the next call', async () => {
    const { calls, run } = controlledRun();
    const batcher = new Coalescer(run, { maxBatch: 10, maxInFlight: 1 });
    const first = batcher.submit('a');
    const b = batcher.submit('b');
    const c = batcher.submit('c');
    calls[0]!.finish();
    await first;
    await tick();
    calls[1]!.finish(new Error('connection lost'));
    for (const failed of [b, c]) expect(await failed.catch((e: Error) => e.message)).to.equal('connection lost');
    const d = batcher.submit('d');
    calls[2]!.finish();
    expect(await d).to.equal('D');
  });
});
