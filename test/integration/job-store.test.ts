import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createRedis, type Redis } from '../../shared/redis/client';
import { JobStore, type JobState } from '../../shared/registration/job-store';
import type { PreparedQuote, UploadSession } from '../../shared/registration/types';
import { testServices } from '../helpers/services';

/** Every move of the job state machine (job-store.ts), from every state, against real Redis. */
describe('job store: the moves of a job and the ones refused', () => {
  let redis: Redis;
  let store: JobStore;
  const org = randomUUID();
  before(() => {
    redis = createRedis(testServices().config.redis, 'worker', 'job-store-test');
    store = new JobStore(redis, `jobstore_${Date.now()}`);
  });
  after(() => redis.quit());

  function session(uploadSeconds = 600): UploadSession {
    const jobId = randomUUID();
    return {
      jobId,
      kind: 'register',
      organizationId: org,
      apiKeyId: randomUUID(),
      network: 'testnet',
      title: 'T',
      filename: 'f.wav',
      creators: [],
      externalUserRef: null,
      audioKey: `audio/${org}/${jobId}`,
      createdAt: new Date().toISOString(),
      uploadExpiresAt: new Date(Date.now() + uploadSeconds * 1000).toISOString(),
    };
  }
  const quoteOf = (s: UploadSession, seconds = 300) =>
    ({ session: s, expiresAt: new Date(Date.now() + seconds * 1000).toISOString() }) as unknown as PreparedQuote;

  /** A job brought to `state` through the store's own moves. */
  async function jobIn(state: JobState, uploadSeconds = 600): Promise<UploadSession> {
    const s = session(uploadSeconds);
    await store.reserve(s, uploadSeconds);
    if (state === 'reserved') return s;
    const begun = await store.beginPrepare(org, s.jobId, 60_000);
    if (begun.kind !== 'start') throw new Error('could not start');
    expect(await store.recordAudio(org, s.jobId, begun.run, { mediaHash: '0x00', size: 1, etag: '"e"' })).to.equal(true);
    if (state === 'uploaded') {
      await store.releasePrepare(org, s.jobId, begun.run);
      return s;
    }
    expect(await store.finishPrepare(org, s.jobId, begun.run, quoteOf(s))).to.equal(true);
    if (state === 'prepared') return s;
    expect((await store.beginConfirm(org, s.jobId, 30_000)).kind).to.equal('taken');
    if (state === 'confirming') return s;
    await store.finishConfirm(org, s.jobId, s.audioKey);
    return s;
  }
  const stateOf = async (s: UploadSession) => (await store.load(org, s.jobId))?.state;

  it('prepare starts a run from reserved, uploaded and prepared; is refused when confirming or confirmed', async () => {
    const expected: Record<JobState, string> = {
      reserved: 'start',
      uploaded: 'start',
      prepared: 'start',
      confirming: 'confirmed',
      confirmed: 'confirmed',
    };
    for (const [state, kind] of Object.entries(expected) as [JobState, string][]) {
      const s = await jobIn(state);
      expect((await store.beginPrepare(org, s.jobId, 60_000)).kind, state).to.equal(kind);
      expect(await stateOf(s), state).to.equal(state);
    }
  });

  it('confirm takes only a prepared job; from any other state it changes nothing', async () => {
    const expected: Record<JobState, string> = {
      reserved: 'unprepared',
      uploaded: 'unprepared',
      prepared: 'taken',
      confirming: 'confirmed',
      confirmed: 'confirmed',
    };
    for (const [state, kind] of Object.entries(expected) as [JobState, string][]) {
      const s = await jobIn(state);
      expect((await store.beginConfirm(org, s.jobId, 30_000)).kind, state).to.equal(kind);
      expect(await stateOf(s), state).to.equal(state === 'prepared' ? 'confirming' : state);
    }
  });

  it('a second prepare joins the running run; a run that lost the job stores nothing', async () => {
    const s = await jobIn('reserved');
    const first = await store.beginPrepare(org, s.jobId, 60_000);
    expect(await store.beginPrepare(org, s.jobId, 60_000)).to.deep.equal({ kind: 'join', run: (first as { run: number }).run });
    // confirmed meanwhile (by an earlier quote): the run's quote is refused
    const p = await jobIn('prepared');
    const run = await store.beginPrepare(org, p.jobId, 60_000);
    expect((await store.beginConfirm(org, p.jobId, 30_000)).kind).to.equal('taken');
    expect(await store.finishPrepare(org, p.jobId, (run as { run: number }).run, quoteOf(p))).to.equal(false);
    expect(await store.recordAudio(org, p.jobId, (run as { run: number }).run, { mediaHash: '0x01', size: 2, etag: '"f"' })).to.equal(
      false,
    );
    expect(await stateOf(p)).to.equal('confirming');
  });

  it('a run whose lease lapsed is taken over, and the stale run cannot finish', async () => {
    const s = await jobIn('reserved');
    const stale = await store.beginPrepare(org, s.jobId, 1); // a 1 ms lease: lapsed by the next call
    await new Promise((r) => setTimeout(r, 5));
    const fresh = await store.beginPrepare(org, s.jobId, 60_000);
    expect(fresh.kind).to.equal('start');
    expect(await store.finishPrepare(org, s.jobId, (stale as { run: number }).run, quoteOf(s))).to.equal(false);
    expect(await store.finishPrepare(org, s.jobId, (fresh as { run: number }).run, quoteOf(s))).to.equal(true);
    expect(await stateOf(s)).to.equal('prepared');
  });

  it('a refused debit goes back to prepared; a confirming hold that lapsed reports itself', async () => {
    const s = await jobIn('confirming');
    await store.revertConfirm(org, s.jobId);
    expect(await stateOf(s)).to.equal('prepared');
    expect((await store.beginConfirm(org, s.jobId, 1)).kind).to.equal('taken');
    await new Promise((r) => setTimeout(r, 5));
    expect((await store.beginConfirm(org, s.jobId, 30_000)).kind).to.equal('lapsed');
    expect((await store.beginPrepare(org, s.jobId, 60_000)).kind).to.equal('lapsed');
  });

  it('an expired upload session refuses prepare, while its quote stays confirmable and keeps the job alive', async () => {
    const s = await jobIn('prepared', 1);
    await new Promise((r) => setTimeout(r, Date.parse(s.uploadExpiresAt) - Date.now() + 20));
    expect((await store.beginPrepare(org, s.jobId, 60_000)).kind).to.equal('gone');
    expect(await redis.pttl(store.key(org, s.jobId))).to.be.greaterThan(200_000); // the quote's 300 s
    expect((await store.beginConfirm(org, s.jobId, 30_000)).kind).to.equal('taken');
  });

  it('confirm takes the upload out of the sweep; reserve put it in', async () => {
    const s = await jobIn('prepared');
    expect(await redis.zscore(store.uploadsKey(), s.audioKey)).to.equal(String(Date.parse(s.uploadExpiresAt)));
    await store.beginConfirm(org, s.jobId, 30_000);
    await store.finishConfirm(org, s.jobId, s.audioKey);
    expect(await redis.zscore(store.uploadsKey(), s.audioKey)).to.equal(null);
  });
});
