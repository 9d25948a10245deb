import { expect } from 'chai';
import { validEnv } from '../helpers/valid-env';
import { TransactionFeed } from '../../web/ws/feed';
import { loadConfig } from '../../shared/config';
import type { TransactionView } from '../../shared/transactions/service';

const STEPS = ['validating', 'preparing_transaction', 'signing', 'submitting', 'confirming', 'completed'];

function view(stepCount: number, overrides: Partial<TransactionView> = {}): TransactionView {
  const steps = STEPS.slice(0, stepCount).map((name, i) => ({
    name,
    status: i === stepCount - 1 && name !== 'completed' ? 'in_progress' : 'completed',
    at: `2026-01-01T00:00:0${i}.000Z`,
  }));
  const current = STEPS[stepCount - 1]!;
  return {
    transaction_id: 't',
    transaction_type: 'register',
    network: 'testnet',
    status: current === 'completed' ? 'finalized' : 'pending',
    current_step: current,
    progress: 0,
    is_complete: current === 'completed',
    steps,
    result: null,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: `2026-01-01T00:00:0${stepCount}.000Z`,
    ...overrides,
  };
}

describe('live tracking: the per-subscriber feed', () => {
  it('passes each newer state once and drops older or repeated ones', () => {
    const feed = new TransactionFeed();
    expect(feed.accept(view(3))).to.equal(true);
    expect(feed.accept(view(3))).to.equal(false); // the same state again (connected, then its late message)
    expect(feed.accept(view(2))).to.equal(false); // published before the state the client already has
    expect(feed.accept(view(4))).to.equal(true);
    // a status-only move inside a step (a retracted block) is news
    expect(feed.accept(view(4, { status: 'submitted', updated_at: '2026-01-01T00:00:09.000Z' }))).to.equal(true);
  });

  it('ends at a terminal state: nothing passes after it', () => {
    const feed = new TransactionFeed();
    expect(feed.accept(view(6))).to.equal(true);
    expect(feed.ended).to.equal(true);
    expect(feed.accept(view(6, { updated_at: '2026-01-02T00:00:00.000Z' }))).to.equal(false);
    const failed = new TransactionFeed();
    expect(failed.accept(view(4, { status: 'failed', current_step: 'failed', is_complete: true }))).to.equal(true);
    expect(failed.accept(view(5))).to.equal(false);
  });

  it('has configurable socket limits with safe defaults', () => {
    const env = validEnv();
    expect(loadConfig(env).live).to.deep.equal({
      maxSocketsPerOrg: 1000,
      heartbeatSeconds: 30,
      idleTimeoutSeconds: 900,
      maxBufferedBytes: 262144,
    });
    expect(loadConfig({ ...env, WS_MAX_SOCKETS_PER_ORG: '5' }).live.maxSocketsPerOrg).to.equal(5);
    expect(() => loadConfig({ ...env, WS_MAX_SOCKETS_PER_ORG: '0', WS_HEARTBEAT_SECONDS: 'x' })).to.throw(
      /WS_MAX_SOCKETS_PER_ORG[\s\S]*WS_HEARTBEAT_SECONDS/,
    );
  });
});
