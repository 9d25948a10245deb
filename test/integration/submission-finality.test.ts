import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { TestApp } from '../helpers/app';
import { useStack } from '../helpers/workers';
import {
  findSubmission,
  insertSubmission,
  markSubmissionFinalized,
  markSubmissionInBlock,
  type SubmissionRow,
} from '../../shared/transactions/submissions-repo';

describe("a relayer batch's finality, as each of its items reaches it", function () {
  this.timeout(60_000);
  const stack = useStack({ env: { REDIS_PREFIX: `finality_${Date.now()}` }, queues: [] });
  let app: TestApp;
  before(() => ({ app } = stack));
  const made: string[] = [];
  // each test's batches gone before the stack closes (its own `after`), so no submitter of a later test finds one
  afterEach(() => app.context.db('chain_submissions').whereIn('id', made.splice(0)).del());

  /** A batch of three calls, signed and stored; in a block when `inBlock`. */
  async function batch(inBlock: boolean): Promise<SubmissionRow> {
    const hex = () => `0x${randomBytes(32).toString('hex')}`;
    const row = await insertSubmission(app.context.db, {
      network: 'testnet',
      relayer: `5finality${randomBytes(8).toString('hex')}`,
      nonce: 1,
      genesisHash: hex(),
      extrinsicHex: '0x00',
      txHash: hex(),
      signedAtBlock: 1,
      items: 3,
    });
    made.push(row.id);
    if (inBlock) await markSubmissionInBlock(app.context.db, row.id, { blockHash: hex(), blockNumber: 5, index: 1 });
    return row;
  }

  /** The statements naming the batch that `run` sent. */
  async function statements(id: string, run: () => Promise<unknown>): Promise<number> {
    let sent = 0;
    const count = (q: { sql: string; bindings?: unknown[] }) =>
      void (q.sql.includes('chain_submissions') && q.bindings?.includes(id) && sent++);
    app.context.db.on('query', count);
    try {
      await run();
    } finally {
      app.context.db.off('query', count);
    }
    return sent;
  }

  it('is marked finalized by the first of its items; the others, at once or after, send nothing more', async () => {
    const { id } = await batch(true);
    const mark = () => markSubmissionFinalized(app.context.db, id);
    // all at once, as they reach finality together, then one more
    expect(await statements(id, async () => (await Promise.all([mark(), mark(), mark()]), await mark()))).to.equal(1);
    expect((await findSubmission(app.context.db, id))?.status).to.equal('finalized');
  });

  it('is not marked finalized before it is in a block, and is asked about again', async () => {
    const { id } = await batch(false);
    const mark = () => markSubmissionFinalized(app.context.db, id);
    expect(await statements(id, async () => (await mark(), await mark()))).to.equal(2);
    expect((await findSubmission(app.context.db, id))?.status).to.equal('signed');
  });
});
