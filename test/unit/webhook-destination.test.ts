import { expect } from 'chai';
import type { LookupAddress } from 'node:dns';
import { forbiddenAddressKind } from '../../shared/webhooks/address-policy';
import { pinnedLookup, RefusedDestination, vetDestination, type Resolver } from '../../shared/webhooks/destination';
import { parseRetryAfter, retryDelaySeconds } from '../../shared/webhooks/retry-policy';

describe('webhook address policy (SSRF)', () => {
  const forbidden: [string, string][] = [
    ['0.0.0.0', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'shared (CGNAT)'],
    ['100.127.255.254', 'shared (CGNAT)'],
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['169.254.169.254', 'link-local'],
    ['224.0.0.251', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456:789a::1', 'unique-local'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['64:ff9b::10.0.0.1', 'private'],
    ['2002:c0a8:0101::1', 'private'], // 6to4 of 192.168.1.1
    ['::ffff:0:127.0.0.1', 'loopback'], // IPv4-translated (SIIT)
    ['::ffff:0:a9fe:a9fe', 'link-local'], // IPv4-translated 169.254.169.254, hex spelling
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo (an IPv4 tunnel)'],
    ['2001::1', 'Teredo (an IPv4 tunnel)'],
    ['2600:1f18::5efe:10.0.0.1', 'private'], // ISATAP interface id carrying 10.0.0.1
    ['fe80::200:5efe:127.0.0.1', 'loopback'], // ISATAP, link-local prefix
    ['[::1]', 'loopback'],
    ['not-an-ip', 'not an IP address'],
  ];
  for (const [address, kind] of forbidden) it(`refuses ${address} (${kind})`, () => expect(forbiddenAddressKind(address)).to.equal(kind));

  for (const address of [
    '93.184.216.34',
    '8.8.8.8',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:0808:0808::1',
    '::ffff:0:8.8.8.8',
    '2600:1f18::5efe:8.8.8.8',
  ]) {
    it(`allows the public address ${address}`, () => expect(forbiddenAddressKind(address)).to.equal(null));
  }
});

describe('webhook destination vetting', () => {
  const strict = { allowHttp: false, allowPrivate: false };
  const resolver =
    (answers: Record<string, string[]>): Resolver =>
    async (host) =>
      (answers[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

  it('refuses a host name that resolves to the metadata address', async () => {
    const err = await vetDestination(
      'https://metadata.example.test/x',
      strict,
      resolver({ 'metadata.example.test': ['169.254.169.254'] }),
    ).catch((e) => e);
    expect(err).to.be.instanceOf(RefusedDestination);
    expect(err.message).to.equal(
      'refused: metadata.example.test resolves to 169.254.169.254, a link-local address (private addresses are not allowed)',
    );
  });

  it('refuses a host with any private answer among public ones', async () => {
    const err = await vetDestination(
      'https://mixed.example.test/',
      strict,
      resolver({ 'mixed.example.test': ['93.184.216.34', '10.0.0.7'] }),
    ).catch((e) => e);
    expect(err).to.be.instanceOf(RefusedDestination);
  });

  it('accepts a public host, and anything when private addresses are allowed', async () => {
    const ok = await vetDestination('https://hooks.example.test/', strict, resolver({ 'hooks.example.test': ['93.184.216.34'] }));
    expect(ok.addresses).to.deep.equal([{ address: '93.184.216.34', family: 4 }]);
    await vetDestination(
      'https://local.example.test/',
      { allowHttp: false, allowPrivate: true },
      resolver({ 'local.example.test': ['127.0.0.1'] }),
    );
  });

  it('refuses http:// unless allowed, and anything that is not http(s)', async () => {
    const public_ = resolver({ 'hooks.example.test': ['93.184.216.34'] });
    expect((await vetDestination('http://hooks.example.test/', strict, public_).catch((e) => e)).message).to.include('must use https');
    await vetDestination('http://hooks.example.test/', { ...strict, allowHttp: true }, public_);
    expect(await vetDestination('ftp://hooks.example.test/', { ...strict, allowHttp: true }, public_).catch((e) => e)).to.be.instanceOf(
      RefusedDestination,
    );
  });

  it('passes resolution failures on as retryable errors, not refusals', async () => {
    const failing: Resolver = async () => {
      throw Object.assign(new Error('getaddrinfo EAI_AGAIN hooks.example.test'), { code: 'EAI_AGAIN' });
    };
    const err = await vetDestination('https://hooks.example.test/', strict, failing).catch((e) => e);
    expect(err).to.not.be.instanceOf(RefusedDestination);
  });

  it('connects only to the vetted addresses, whatever DNS answers later (no rebinding)', () => {
    const lookup = pinnedLookup([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1::1', family: 6 },
    ]);
    const answers: unknown[] = [];
    lookup('hooks.example.test', { all: true }, (_err, addresses) => answers.push(addresses));
    lookup('hooks.example.test', { family: 4 }, (_err, address, family) => answers.push([address, family]));
    lookup('hooks.example.test', { family: 6, all: true }, (_err, addresses) =>
      answers.push((addresses as LookupAddress[]).map((a) => a.address)),
    );
    expect(answers).to.deep.equal([
      [
        { address: '93.184.216.34', family: 4 },
        { address: '2606:2800:220:1::1', family: 6 },
      ],
      ['93.184.216.34', 4],
      ['2606:2800:220:1::1'],
    ]);
  });
});

describe('webhook retry delays (docs/api.md#delivery-and-retries)', () => {
  const schedule = [1, 5, 30, 120, 600, 1800];
  it('follows the schedule, holding its last step', () => {
    expect([0, 1, 2, 3, 4, 5, 6].map((i) => retryDelaySeconds(schedule, i))).to.deep.equal([1, 5, 30, 120, 600, 1800, 1800]);
  });
  it('lets Retry-After lengthen a wait up to the following step, never shorten it', () => {
    expect(retryDelaySeconds(schedule, 0, 3)).to.equal(3);
    expect(retryDelaySeconds(schedule, 0, 3600)).to.equal(5);
    expect(retryDelaySeconds(schedule, 2, 0)).to.equal(30);
    expect(retryDelaySeconds(schedule, 5, 7200)).to.equal(1800);
  });
  it('reads Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-11-22T10:00:00Z');
    expect(parseRetryAfter('120', now)).to.equal(120);
    expect(parseRetryAfter('Sun, 22 Nov 2026 10:01:30 GMT', now)).to.equal(90);
    expect(parseRetryAfter('Sun, 22 Nov 2026 09:00:00 GMT', now)).to.equal(0);
    expect(parseRetryAfter('soon', now)).to.equal(undefined);
    expect(parseRetryAfter(undefined, now)).to.equal(undefined);
    expect(parseRetryAfter('-5', now)).to.equal(undefined);
  });
});
