import { expect } from 'chai';
import { loadConfig, ConfigError, type Env } from '../../shared/config';
import { bullPrefix } from '../../shared/redis/settings';
import { validEnv } from '../helpers/valid-env';

// REDIS_URL or REDIS_CLUSTER_NODES: each case says which
const { REDIS_URL: _url, ...base } = validEnv();

const problemsOf = (env: Env): string[] => {
  try {
    loadConfig({ ...base, ...env });
    return [];
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
};

describe('Redis settings: one server or a cluster', () => {
  it('one server keeps the key names every release has used', () => {
    const { redis } = loadConfig({ ...base, REDIS_URL: 'redis://localhost:6379', REDIS_PREFIX: 'acme' });
    expect(redis).to.deep.equal({ url: 'redis://localhost:6379', prefix: 'acme', name: 'acme' });
    expect(bullPrefix(redis, 'chain')).to.equal('acme:bull');
    expect(bullPrefix(redis, 'webhooks')).to.equal('acme:bull');
  });

  it('a cluster hash-tags the service keys as one slot and each queue as its own', () => {
    const { redis } = loadConfig({ ...base, REDIS_CLUSTER_NODES: '10.0.0.1:7000, 10.0.0.2:7001', REDIS_PREFIX: 'acme' });
    expect(redis.prefix).to.equal('{acme}');
    expect(redis.cluster).to.deep.equal({
      seeds: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
      ],
      tls: false,
      username: undefined,
      password: undefined,
    });
    expect(bullPrefix(redis, 'chain')).to.equal('{acme:bull:chain}');
    expect(bullPrefix(redis, 'webhooks')).to.equal('{acme:bull:webhooks}');
  });

  it('takes TLS and credentials from URLs, decoded', () => {
    const { redis } = loadConfig({
      ...base,
      REDIS_CLUSTER_NODES: 'rediss://app:p%40ss@redis-0.internal:6380,rediss://redis-1.internal:6380,[::1]:7000',
    });
    expect(redis.cluster).to.deep.equal({
      seeds: [
        { host: 'redis-0.internal', port: 6380 },
        { host: 'redis-1.internal', port: 6380 },
        { host: '::1', port: 7000 },
      ],
      tls: true,
      username: 'app',
      password: 'p@ss',
    });
  });

  it('refuses both REDIS_URL and REDIS_CLUSTER_NODES, a node without a port, another scheme, and braces in the prefix', () => {
    expect(problemsOf({ REDIS_URL: 'redis://x:1', REDIS_CLUSTER_NODES: 'x:1' })).to.include(
      'set REDIS_URL (one server) or REDIS_CLUSTER_NODES (a cluster), not both',
    );
    expect(problemsOf({ REDIS_CLUSTER_NODES: 'redis-0.internal' })[0]).to.match(/^REDIS_CLUSTER_NODES: "redis-0.internal" is not/);
    expect(problemsOf({ REDIS_CLUSTER_NODES: 'http://x:1' })[0]).to.match(/^REDIS_CLUSTER_NODES: "http:\/\/x:1" is not/);
    expect(problemsOf({ REDIS_CLUSTER_NODES: 'x:1', REDIS_PREFIX: '{works}' })[0]).to.match(/REDIS_PREFIX may not contain/);
    expect(problemsOf({})).to.include('REDIS_URL is required');
  });
});
