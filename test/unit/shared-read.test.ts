import { expect } from 'chai';
import { sharedRead } from '../../shared/metrics/shared-read';

describe('sharedRead (the state behind /metrics)', () => {
  it('gives every caller during a read that read, and its result for maxAgeMs after it ended', async () => {
    let clock = 1000;
    let reads = 0;
    let finish!: () => void;
    const read = sharedRead(
      () => new Promise<number>((resolve) => (finish = () => resolve(++reads))),
      5000,
      () => clock,
    );
    const [a, b] = [read(), read()];
    finish();
    expect(await Promise.all([a, b])).to.deep.equal([1, 1]);
    clock += 4999;
    expect(await read()).to.equal(1);
    clock += 1;
    const c = read();
    finish();
    expect(await c).to.equal(2);
  });

  it('keeps no failed read: the next caller reads again', async () => {
    let calls = 0;
    const read = sharedRead(async () => {
      calls += 1;
      if (calls === 1) throw new Error('away');
      return calls;
    }, 5000);
    await read().then(
      () => expect.fail('the first read fails'),
      (err: Error) => expect(err.message).to.equal('away'),
    );
    expect(await read()).to.equal(2);
    expect(await read()).to.equal(2);
  });
});
