import { expect } from 'chai';
import type { LookupAddress } from 'node:dns';
import { ResolvedHosts } from '../../shared/webhooks/resolved-hosts';
import { vetDestination, RefusedDestination } from '../../shared/webhooks/destination';

/** A resolver that answers what `answers` holds for a host when `release` is called, counting what it was asked. */
function controlledResolver() {
  const asked: string[] = [];
  const answers = new Map<string, LookupAddress[] | Error>();
  const waiting: (() => void)[] = [];
  const resolve = (hostname: string) => {
    asked.push(hostname);
    return new Promise<LookupAddress[]>((done, fail) =>
      waiting.push(() => {
        const answer = answers.get(hostname) ?? new Error(`getaddrinfo ENOTFOUND ${hostname}`);
        if (answer instanceof Error) fail(answer);
        else done(structuredClone(answer));
      }),
    );
  };
  const release = () => waiting.splice(0).forEach((answer) => answer());
  return { asked, answers, resolve, release };
}

describe("a worker's answers for webhook hosts (resolved-hosts.ts)", () => {
  const A = [{ address: '93.184.215.14', family: 4 }];
  const B = [{ address: '93.184.215.15', family: 4 }];

  it('shares one lookup among those asking for a host meanwhile, and reuses its answer until it is maxAgeMs old', async () => {
    const dns = controlledResolver();
    let now = 1_000;
    const hosts = new ResolvedHosts({ lookup: dns.resolve, now: () => now });
    dns.answers.set('hooks.example', A).set('other.example', B);
    const together = [hosts.resolve('hooks.example'), hosts.resolve('hooks.example'), hosts.resolve('other.example')];
    dns.release();
    expect(await Promise.all(together)).to.deep.equal([A, A, B]);
    expect(dns.asked).to.deep.equal(['hooks.example', 'other.example']);

    now += 29_999;
    dns.answers.set('hooks.example', B);
    expect(await hosts.resolve('hooks.example')).to.deep.equal(A);
    expect(dns.asked).to.have.length(2);

    now += 1; // 30 s after the answer: asked again, and the new answer is the one used
    const renewed = hosts.resolve('hooks.example');
    dns.release();
    expect(await renewed).to.deep.equal(B);
    expect(dns.asked).to.deep.equal(['hooks.example', 'other.example', 'hooks.example']);
  });

  it('keeps no failure: those asking meanwhile all get it, and the next asks again', async () => {
    const dns = controlledResolver();
    const hosts = new ResolvedHosts({ lookup: dns.resolve, now: () => 0 });
    const together = [hosts.resolve('gone.example'), hosts.resolve('gone.example')].map((p) =>
      p.then(
        () => 'answered',
        (e: Error) => e.message,
      ),
    );
    dns.release();
    expect(await Promise.all(together)).to.deep.equal(['getaddrinfo ENOTFOUND gone.example', 'getaddrinfo ENOTFOUND gone.example']);
    dns.answers.set('gone.example', A);
    const again = hosts.resolve('gone.example');
    dns.release();
    expect(await again).to.deep.equal(A);
    expect(dns.asked).to.deep.equal(['gone.example', 'gone.example']);
  });

  it('gives each caller its own copy of the addresses', async () => {
    const dns = controlledResolver();
    const hosts = new ResolvedHosts({ lookup: dns.resolve, now: () => 0 });
    dns.answers.set('hooks.example', [{ address: '93.184.215.14', family: 4 }]);
    const first = [hosts.resolve('hooks.example'), hosts.resolve('hooks.example')];
    dns.release();
    const [got, sharer] = await Promise.all(first);
    got![0]!.address = '10.0.0.1';
    got!.push({ address: '10.0.0.2', family: 4 });
    expect(sharer).to.deep.equal([{ address: '93.184.215.14', family: 4 }]);
    expect(await hosts.resolve('hooks.example')).to.deep.equal([{ address: '93.184.215.14', family: 4 }]);
  });

  it('keeps no empty answer, and none that `keep` refuses: the next attempt asks again', async () => {
    const dns = controlledResolver();
    const hosts = new ResolvedHosts({ lookup: dns.resolve, now: () => 0, keep: (a) => a.every((x) => x.address !== '10.0.0.1') });
    dns.answers.set('empty.example', []).set('private.example', [{ address: '10.0.0.1', family: 4 }]);
    const first = [hosts.resolve('empty.example'), hosts.resolve('private.example')];
    dns.release();
    expect(await Promise.all(first)).to.deep.equal([[], [{ address: '10.0.0.1', family: 4 }]]);
    dns.answers.set('empty.example', A).set('private.example', B);
    const again = [hosts.resolve('empty.example'), hosts.resolve('private.example')];
    dns.release();
    expect(await Promise.all(again)).to.deep.equal([A, B]);
    expect(dns.asked).to.deep.equal(['empty.example', 'private.example', 'empty.example', 'private.example']);
  });

  it('joins a lookup under way for joinMs only: one that never ends does not hold its host', async () => {
    const asked: string[] = [];
    let now = 0;
    let answering = false;
    // the first lookup never ends; those after it answer at once
    const hosts = new ResolvedHosts({
      lookup: async (hostname) => {
        asked.push(hostname);
        if (!answering) return new Promise<never>(() => {});
        return A;
      },
      joinMs: 5_000,
      now: () => now,
    });
    void hosts.resolve('stuck.example');
    now = 4_999;
    void hosts.resolve('stuck.example'); // joins it
    expect(asked).to.have.length(1);
    now = 5_000;
    answering = true;
    expect(await hosts.resolve('stuck.example')).to.deep.equal(A);
    expect(asked).to.have.length(2);
    expect(await hosts.resolve('stuck.example')).to.deep.equal(A); // and kept
    expect(asked).to.have.length(2);
  });

  it('ages answers by a clock that only goes forward (performance.now), not the wall clock', async () => {
    const asked: string[] = [];
    const hosts = new ResolvedHosts({ lookup: async (h) => (asked.push(h), A) });
    await hosts.resolve('hooks.example');
    const realNow = Date.now;
    Date.now = () => realNow() + 3_600_000; // the wall clock stepped an hour ahead
    try {
      expect(await hosts.resolve('hooks.example')).to.deep.equal(A);
    } finally {
      Date.now = realNow;
    }
    expect(asked).to.deep.equal(['hooks.example']);
  });

  it('forgets hosts nobody asked for within maxAgeMs', async () => {
    const dns = controlledResolver();
    let now = 0;
    const hosts = new ResolvedHosts({ lookup: dns.resolve, now: () => now });
    for (const host of ['a.example', 'b.example']) dns.answers.set(host, A);
    const both = [hosts.resolve('a.example'), hosts.resolve('b.example')];
    dns.release();
    await Promise.all(both);
    expect(hosts.size).to.equal(2);
    now = 31_000;
    dns.answers.set('c.example', A);
    const third = hosts.resolve('c.example');
    dns.release();
    await third;
    expect(hosts.size).to.equal(1);
  });

  it('leaves the policy to each attempt: a kept answer is vetted, and a host renewed to a forbidden address is refused', async () => {
    const dns = controlledResolver();
    let now = 0;
    const hosts = new ResolvedHosts({ lookup: dns.resolve, now: () => now });
    const strict = { allowHttp: false, allowPrivate: false };
    dns.answers.set('hooks.example', A);
    const first = vetDestination('https://hooks.example/in', strict, hosts.resolve);
    dns.release();
    expect((await first).addresses).to.deep.equal(A);
    dns.answers.set('hooks.example', [{ address: '169.254.169.254', family: 4 }]);
    expect((await vetDestination('https://hooks.example/in', strict, hosts.resolve)).addresses).to.deep.equal(A);
    now = 30_000;
    const renewed = vetDestination('https://hooks.example/in', strict, hosts.resolve).catch((e: unknown) => e);
    dns.release();
    const refused = await renewed;
    expect(refused).to.be.instanceOf(RefusedDestination);
    expect((refused as Error).message).to.match(/resolves to 169\.254\.169\.254, a link-local address/);
  });
});
