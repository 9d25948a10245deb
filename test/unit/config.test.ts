import { expect } from 'chai';
import { loadConfig, ConfigError, type Env } from '../../shared/config';
import { validEnv } from '../helpers/valid-env';
import { explorerUrl } from '../../shared/chain/explorer';

const valid: Env = validEnv();

describe('configuration', () => {
  it('parses a valid environment into frozen sections with defaults', () => {
    const config = loadConfig(valid);
    expect(config.http.port).to.equal(3000);
    expect(config.ttl).to.deep.equal({ uploadSeconds: 600, quoteSeconds: 300, idempotencySeconds: 86400 });
    expect(config.workers.queues).to.include.members(['prepare', 'chain', 'webhooks']);
    expect(Object.isFrozen(config.http)).to.equal(true);
  });

  it("links to Allfeat's explorer in production and for remote nodes, to a node on this machine in polkadot.js apps elsewhere", () => {
    const production = { ...valid, NODE_ENV: 'production', OPERATOR_ORG_IDS: 'ops' };
    const templates = (env: Env) => loadConfig(env).chains.map((c) => [c.network, c.explorerUrlTemplate]);
    const allfeat = [
      ['testnet', 'https://explorer.allfeat.org/extrinsics/{block}-{index}?network=melodie'],
      ['mainnet', 'https://explorer.allfeat.org/extrinsics/{block}-{index}'],
    ];
    const local = (testnet: string, mainnet: string) => ({
      CHAIN_TESTNET_WS: testnet,
      CHAIN_MAINNET_WS: mainnet,
      RELAYER_SEED_MAINNET: '//Bob',
    });
    const loopback = local('ws://127.0.0.1:9944', 'ws://[::1]:9955/rpc');
    expect(templates({ ...production, ...loopback })).to.deep.equal(allfeat);
    for (const nodeEnv of ['development', 'test', undefined]) {
      expect(templates({ ...valid, ...loopback, NODE_ENV: nodeEnv }), String(nodeEnv)).to.deep.equal([
        ['testnet', 'https://polkadot.js.org/apps/?rpc=ws%3A%2F%2F127.0.0.1%3A9944#/explorer/query/{block}'],
        ['mainnet', 'https://polkadot.js.org/apps/?rpc=ws%3A%2F%2F%5B%3A%3A1%5D%3A9955%2Frpc#/explorer/query/{block}'],
      ]);
      // a remote node (whose URL may hold a provider's key, in its path too) or credentials: never in a link
      const remote = local('wss://user:secret@127.0.0.1/ws?apikey=k', 'wss://rpc.provider.example/2f1c0e6a-secret-api-key');
      expect(templates({ ...valid, ...remote, NODE_ENV: nodeEnv }), String(nodeEnv)).to.deep.equal(allfeat);
    }
    // a template set explicitly wins, in production and elsewhere
    for (const env of [production, valid])
      expect(loadConfig({ ...env, EXPLORER_URL_TESTNET: 'https://x.example/b/{block}' }).chains[0]?.explorerUrlTemplate).to.equal(
        'https://x.example/b/{block}',
      );
    expect(explorerUrl(loadConfig(valid).chains, 'testnet', { blockNumber: 42, index: 3 })).to.equal(
      'https://polkadot.js.org/apps/?rpc=ws%3A%2F%2F127.0.0.1%3A9944#/explorer/query/42',
    );
    expect(explorerUrl(loadConfig(production).chains, 'testnet', { blockNumber: 42, index: 3 })).to.equal(
      'https://explorer.allfeat.org/extrinsics/42-3?network=melodie',
    );
  });

  it('names every missing or malformed variable at once', () => {
    try {
      loadConfig({
        ...valid,
        DATABASE_URL: undefined,
        PORT: 'eighty',
        SECRETS_KEY: 'short',
        WORKER_QUEUES: 'chain,bogus',
        QUOTE_TTL_SECONDS: '900',
      });
      expect.fail('should throw');
    } catch (err) {
      expect(err).to.be.instanceOf(ConfigError);
      const message = (err as Error).message;
      for (const name of ['DATABASE_URL', 'PORT', 'SECRETS_KEY', 'WORKER_QUEUES', 'QUOTE_TTL_SECONDS']) expect(message).to.include(name);
      expect((err as ConfigError).problems).to.have.length(5);
    }
  });

  it('requires at least one chain network', () => {
    expect(() => loadConfig({ ...valid, CHAIN_TESTNET_WS: undefined })).to.throw(/CHAIN_TESTNET_WS or CHAIN_MAINNET_WS/);
  });

  it('drains the web for 10 s by default and wants the shutdown limit past the drain', () => {
    expect(loadConfig(valid).shutdown).to.deep.equal({ drainMs: 10_000, timeoutMs: 25_000 });
    expect(loadConfig({ ...valid, SHUTDOWN_DRAIN_MS: '0' }).shutdown.drainMs).to.equal(0);
    expect(() => loadConfig({ ...valid, SHUTDOWN_DRAIN_MS: '30000' })).to.throw(
      /SHUTDOWN_TIMEOUT_MS must be greater than SHUTDOWN_DRAIN_MS/,
    );
    expect(() => loadConfig({ ...valid, SHUTDOWN_DRAIN_MS: '-1' })).to.throw(/SHUTDOWN_DRAIN_MS must be an integer/);
  });

  it("bounds a web's PostgreSQL statements at 5 s by default, 3 to 20 s (3 s: /metrics' own statements' bound)", () => {
    expect(loadConfig(valid).database.webStatementTimeoutMs).to.equal(5000);
    expect(loadConfig({ ...valid, WEB_STATEMENT_TIMEOUT_MS: '3000' }).database.webStatementTimeoutMs).to.equal(3000);
    for (const refused of ['0', '2999', '20001', 'off'])
      expect(() => loadConfig({ ...valid, WEB_STATEMENT_TIMEOUT_MS: refused }), refused).to.throw(
        /WEB_STATEMENT_TIMEOUT_MS must be an integer from 3000 to 20000/,
      );
  });

  it('serves no worker metrics unless METRICS_PORT is set', () => {
    expect(loadConfig(valid).metrics).to.deep.equal({ port: undefined, host: '0.0.0.0' });
    expect(loadConfig({ ...valid, METRICS_PORT: '9464', METRICS_HOST: '127.0.0.1' }).metrics).to.deep.equal({
      port: 9464,
      host: '127.0.0.1',
    });
    expect(loadConfig({ ...valid, METRICS_PORT: '0' }).metrics.port).to.equal(0);
    expect(() => loadConfig({ ...valid, METRICS_PORT: 'x' })).to.throw(/METRICS_PORT must be an integer from 0 to 65535/);
  });

  it('restricts WORKER_QUEUES to the named queues', () => {
    expect(loadConfig({ ...valid, WORKER_QUEUES: 'webhooks' }).workers.queues).to.deep.equal(['webhooks']);
  });

  it('has safe webhook and operator defaults', () => {
    // production will not start until someone is named an operator
    expect(() => loadConfig({ ...valid, NODE_ENV: 'production' })).to.throw(/operators must be configured in production/);
    const config = loadConfig({ ...valid, NODE_ENV: 'production', OPERATOR_ORG_IDS: 'ops' });
    expect(config.webhooks).to.include({
      allowHttp: false,
      allowPrivate: false,
      concurrency: 32,
      keepAliveMs: 4000,
      attemptRetentionDays: 30,
    });
    expect(config.operators).to.deep.equal({ credential: undefined, orgIds: ['ops'] });
    expect(config.identity.maxTokenAgeSeconds).to.equal(3600);
    expect(config.workers.queues).to.include('webhooks-dead');
  });

  it('keeps attempts at least 30 days, refuses private delivery in production, checks the operator credential', () => {
    expect(() => loadConfig({ ...valid, WEBHOOK_ATTEMPT_RETENTION_DAYS: '29' })).to.throw(/WEBHOOK_ATTEMPT_RETENTION_DAYS/);
    expect(loadConfig({ ...valid, WEBHOOK_ATTEMPT_RETENTION_DAYS: '90' }).webhooks.attemptRetentionDays).to.equal(90);
    expect(() => loadConfig({ ...valid, NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE: 'true' })).to.throw(
      /WEBHOOK_ALLOW_PRIVATE must not be set in production/,
    );
    expect(() => loadConfig({ ...valid, OPERATOR_CREDENTIAL: 'nopassword' })).to.throw(/OPERATOR_CREDENTIAL must be user:password/);
    expect(() => loadConfig({ ...valid, NODE_ENV: 'production', OPERATOR_CREDENTIAL: 'ops:short' })).to.throw(/at least 16 characters/);
    const config = loadConfig({ ...valid, OPERATOR_CREDENTIAL: 'ops:pa:ss', OPERATOR_ORG_IDS: ' a , b ', WEBHOOK_CONCURRENCY: '4' });
    expect(config.operators).to.deep.equal({ credential: { username: 'ops', password: 'pa:ss' }, orgIds: ['a', 'b'] });
    expect(config.webhooks.concurrency).to.equal(4);
  });
});
