import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { insertBareOrgAndKey, useOwnDatabase } from '../helpers/services';

/**
 * Migration 20261123000000: a transaction keeps the typed anchor it was confirmed with, not the whole Redis
 * quote. Transactions confirmed before it (an old quote in the row) are carried over, on a database of its own.
 */
describe('the anchor migration, on a database of its own', () => {
  const ownDb = useOwnDatabase('anchor_migration');

  it('maps an old quote to the anchor (a reused audio included), and back on the way down', async () => {
    const db = ownDb();
    await db.migrate.latest();
    await db.migrate.down({ name: '20261123000000_table_owners.ts' });
    expect(await db.schema.hasColumn('transactions', 'anchor')).to.equal(false);

    const { org, key } = await insertBareOrgAndKey(db, 'old');
    const creators = [{ full_name: 'Ada', roles: { author: true }, isni: '000000012146438X' }];
    const quoted = (jobId: string, reusedAudio?: { mediaHash: string; size: number }) => ({
      session: {
        jobId,
        kind: 'register',
        audioKey: `audio/${org.id}/${jobId}`,
        title: 'Old',
        filename: 'old.wav',
        creators,
        ...(reusedAudio ? { reusedAudio } : {}),
      },
      commitment: '0xc0',
      mediaHash: '0xaa',
      merkleRoot: '0xbb',
      audioSize: 12345,
      price: { total_price_credits: 7 },
      isValid: true,
      expiresAt: new Date().toISOString(),
    });
    const jobs = [randomUUID(), randomUUID()];
    for (const [i, jobId] of jobs.entries()) {
      await db('transactions').insert({
        id: randomUUID(),
        job_id: jobId,
        organization_id: org.id,
        api_key_id: key.id,
        network: 'testnet',
        type: 'register',
        status: 'pending',
        current_step: 'validating',
        steps: '[]',
        quote: JSON.stringify(quoted(jobId, i === 1 ? { mediaHash: '0xaa', size: 12345 } : undefined)),
        price_credits: 7,
      });
    }

    await db.migrate.latest();
    const anchors = await db('transactions').whereIn('job_id', jobs).orderBy('job_id').select('job_id', 'anchor');
    for (const { job_id, anchor } of anchors) {
      expect(anchor).to.deep.equal({
        jobId: job_id,
        commitment: '0xc0',
        mediaHash: '0xaa',
        merkleRoot: '0xbb',
        audioKey: `audio/${org.id}/${job_id}`,
        audioSize: 12345,
        title: 'Old',
        filename: 'old.wav',
        creators,
        reusedAudio: job_id === jobs[1],
      });
    }
    expect(await db.schema.hasColumn('transactions', 'quote')).to.equal(false);

    await db.migrate.down({ name: '20261123000000_table_owners.ts' });
    const back = await db('transactions').where({ job_id: jobs[0] }).first('quote');
    expect(back.quote).to.deep.include({ commitment: '0xc0', mediaHash: '0xaa', merkleRoot: '0xbb', audioSize: 12345 });
    expect(back.quote.session).to.deep.include({ jobId: jobs[0], title: 'Old', filename: 'old.wav', creators });
  });
});
