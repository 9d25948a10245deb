import { expect } from 'chai';
import { localChainSettings } from '../../shared/dev/embedded/chain';
import { loadConfig } from '../../shared/config';
import { validEnv } from '../helpers/valid-env';

/**
 * The relayer's batch interval on the local chain (shared/dev/embedded/chain.ts): chopsticks validates each extrinsic
 * on the thread that builds its blocks, so `npm run dev` and the benches, whose chain builds a block every so many
 * ms, send fewer; the tests' chain (a block per extrinsic) and a real node keep the service's default.
 */
describe('the local chain’s relayer settings', () => {
  const base = validEnv();

  it('a chain building a block every 2 s: a batch at most every 1000 ms', () => {
    expect(localChainSettings({}, 2000)).to.deep.equal({ CHAIN_BATCH_INTERVAL_MS: '1000' });
    expect(loadConfig({ ...base, ...localChainSettings({}, 2000) }).chainBatchIntervalMs).to.equal(1000);
  });

  it('a block per extrinsic, or an interval the environment sets: nothing changed', () => {
    expect(localChainSettings({}, 'instant')).to.deep.equal({});
    expect(localChainSettings({ CHAIN_BATCH_INTERVAL_MS: '250' }, 2000)).to.deep.equal({});
  });

  it('the service’s own default, for a real node, stays 250 ms', () => {
    expect(loadConfig(base).chainBatchIntervalMs).to.equal(250);
  });
});
