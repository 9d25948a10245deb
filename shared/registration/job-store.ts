import type { Redis } from '../redis/client';
import type { PreparedQuote, UploadSession } from './types';

/**
 * A job's states (docs/api.md#job-states), one way only:
 *
 *   reserved ──prepare hashed the upload──▶ uploaded ──prepare priced──▶ prepared ──confirm──▶ confirmed
 *        └──────────prepare priced (metadata-only version, or in one go)──────┘
 *
 * `prepared` may be prepared again (the new quote replaces the old). `confirming` is confirm's hold while it
 * debits in PostgreSQL: it becomes `confirmed` on commit, or `prepared` again when the debit is refused.
 * A prepare run holds a lease (`run`, `run_until`): a second prepare while it runs joins it instead of
 * hashing again. A confirm hold whose process died lapses after `confirm_until`; PostgreSQL (one
 * transaction per job id) then says whether it committed. Expiry (the key's TTL) ends any state.
 *
 * Every move is one Lua script on one key, so concurrent calls in any order see one sequence of states.
 */
export type JobState = 'reserved' | 'uploaded' | 'prepared' | 'confirming' | 'confirmed';

/** What prepare learnt of the uploaded object, kept so a second prepare of the same bytes does not hash again. */
export interface UploadedAudio {
  readonly mediaHash: string;
  readonly size: number;
  readonly etag: string;
}

export interface JobRecord {
  readonly state: JobState;
  readonly session: UploadSession;
  readonly audio?: UploadedAudio;
  readonly quote?: PreparedQuote;
  readonly run: number;
}

export type BeginPrepare = { readonly kind: 'start' | 'join'; readonly run: number } | { readonly kind: 'gone' | 'confirmed' | 'lapsed' };

export type BeginConfirm =
  { readonly kind: 'taken'; readonly quote: PreparedQuote } | { readonly kind: 'gone' | 'unprepared' | 'confirmed' | 'lapsed' };

const BEGIN_PREPARE = `
local s = redis.call('HMGET', KEYS[1], 'state', 'upload_until', 'run', 'run_until', 'confirm_until')
if not s[1] then return {'gone'} end
local now = tonumber(ARGV[1])
if s[1] == 'confirmed' then return {'confirmed'} end
if s[1] == 'confirming' then
  if tonumber(s[5]) > now then return {'confirmed'} end
  return {'lapsed'}
end
if tonumber(s[2]) <= now then return {'gone'} end
if tonumber(s[4]) > now then return {'join', s[3]} end
local run = redis.call('HINCRBY', KEYS[1], 'run', 1)
redis.call('HSET', KEYS[1], 'run_until', now + tonumber(ARGV[2]))
return {'start', tostring(run)}`;

// ARGV: run, audio JSON
const RECORD_AUDIO = `
local s = redis.call('HMGET', KEYS[1], 'state', 'run')
if not s[1] or s[2] ~= ARGV[1] or s[1] == 'confirming' or s[1] == 'confirmed' then return 0 end
redis.call('HSET', KEYS[1], 'audio', ARGV[2])
if s[1] == 'reserved' then redis.call('HSET', KEYS[1], 'state', 'uploaded') end
return 1`;

// ARGV: run, quote JSON, quote expiry (ms), now (ms)
const FINISH_PREPARE = `
local s = redis.call('HMGET', KEYS[1], 'state', 'run')
if not s[1] or s[2] ~= ARGV[1] or s[1] == 'confirming' or s[1] == 'confirmed' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'prepared', 'quote', ARGV[2], 'run_until', 0)
local ttl = tonumber(ARGV[3]) - tonumber(ARGV[4])
if ttl > redis.call('PTTL', KEYS[1]) then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1`;

// ARGV: run
const RELEASE_PREPARE = `
if redis.call('HGET', KEYS[1], 'run') == ARGV[1] then redis.call('HSET', KEYS[1], 'run_until', 0) end
return 1`;

// ARGV: now, hold (ms)
const BEGIN_CONFIRM = `
local s = redis.call('HMGET', KEYS[1], 'state', 'confirm_until', 'quote')
if not s[1] then return {'gone'} end
if s[1] == 'confirmed' then return {'confirmed'} end
if s[1] == 'confirming' then
  if tonumber(s[2]) > tonumber(ARGV[1]) then return {'confirmed'} end
  return {'lapsed'}
end
if s[1] ~= 'prepared' then return {'unprepared'} end
redis.call('HSET', KEYS[1], 'state', 'confirming', 'confirm_until', tonumber(ARGV[1]) + tonumber(ARGV[2]))
-- the job outlives the hold, so the upload sweep never takes an object whose confirm is still debiting
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return {'taken', s[3]}`;

// KEYS: job, uploads; ARGV: the audio key
const FINISH_CONFIRM = `
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'state', 'confirmed', 'confirm_until', 0) end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1`;

const REVERT_CONFIRM = `
if redis.call('HGET', KEYS[1], 'state') == 'confirming' then redis.call('HSET', KEYS[1], 'state', 'prepared', 'confirm_until', 0) end
return 1`;

const SCRIPTS = {
  jobBeginPrepare: [1, BEGIN_PREPARE],
  jobRecordAudio: [1, RECORD_AUDIO],
  jobFinishPrepare: [1, FINISH_PREPARE],
  jobReleasePrepare: [1, RELEASE_PREPARE],
  jobBeginConfirm: [1, BEGIN_CONFIRM],
  jobFinishConfirm: [2, FINISH_CONFIRM],
  jobRevertConfirm: [1, REVERT_CONFIRM],
} as const;

type Scripted = Redis & Record<keyof typeof SCRIPTS, (...args: (string | number)[]) => Promise<unknown>>;

function scripted(redis: Redis): Scripted {
  for (const [name, [numberOfKeys, lua]] of Object.entries(SCRIPTS)) {
    if (!(name in redis)) redis.defineCommand(name, { numberOfKeys, lua });
  }
  return redis as Scripted;
}

/** An id or object key as JSON, written as is when it is plain (so a placeholder in it stays a raw byte). */
const fillable = (value: string): string => (/^[\x01\w./:-]*$/.test(value) ? `"${value}"` : JSON.stringify(value));

/**
 * Upload jobs in Redis: one hash per job (its state, session, uploaded audio and quote) with a native TTL,
 * and a sorted set of the uploads not yet confirmed (score: when their upload URL expires), which the
 * maintenance queue sweeps. Keys carry the organization, so one organization can neither read nor move
 * another's job, whatever job id it sends.
 */
export class JobStore {
  private readonly redis: Scripted;

  constructor(
    redis: Redis,
    private readonly prefix: string,
  ) {
    this.redis = scripted(redis);
  }

  key = (organizationId: string, jobId: string) => `${this.prefix}:job:${organizationId}:${jobId}`;
  readonly uploadsKey = () => `${this.prefix}:uploads`;

  /**
   * init: the job starts `reserved`; an upload to come joins the sweep's set. The session keeps the one JSON
   * layout every version of the code reads (a rolling deploy or a rollback meets jobs of the other), and the
   * key check can write it for a caller it is still identifying (`AdmittedWrite`): the caller's ids and its
   * object key go in as written, so their placeholders stay raw control bytes, which JSON.stringify never
   * writes into the caller's own text.
   */
  reserveCommands(session: UploadSession, ttlSeconds: number): string[][] {
    const key = this.key(session.organizationId, session.jobId);
    const { organizationId, apiKeyId, audioKey, ...rest } = session;
    const filled = `"organizationId":${fillable(organizationId)},"apiKeyId":${fillable(apiKeyId)},"audioKey":${fillable(audioKey)}`;
    const json = `${JSON.stringify(rest).slice(0, -1)},${filled}}`;
    const uploadUntil = String(Date.parse(session.uploadExpiresAt));
    // the hash's fields written out (Object.entries(…).flat() cost an init about 4 µs: `npm run bench -- api`)
    const commands = [
      ['hset', key, 'state', 'reserved', 'session', json, 'upload_until', uploadUntil, 'run', '0', 'run_until', '0', 'confirm_until', '0'],
      ['expire', key, String(ttlSeconds)],
    ];
    if (!session.reusedAudio) commands.push(['zadd', this.uploadsKey(), uploadUntil, audioKey]);
    return commands;
  }

  async reserve(session: UploadSession, ttlSeconds: number): Promise<void> {
    await this.run(this.reserveCommands(session, ttlSeconds));
  }

  /** Commands of `reserveCommands`, in one MULTI. */
  async run(commands: readonly (readonly string[])[]): Promise<void> {
    const results = await this.redis.multi(commands as string[][]).exec();
    const failed = results?.find(([err]) => err);
    if (failed) throw failed[0];
  }

  async load(organizationId: string, jobId: string): Promise<JobRecord | undefined> {
    const raw = await this.redis.hmget(this.key(organizationId, jobId), 'state', 'session', 'audio', 'quote', 'run');
    if (!raw[0] || !raw[1]) return undefined;
    return {
      state: raw[0] as JobState,
      session: JSON.parse(raw[1]) as UploadSession,
      ...(raw[2] ? { audio: JSON.parse(raw[2]) as UploadedAudio } : {}),
      ...(raw[3] ? { quote: JSON.parse(raw[3]) as PreparedQuote } : {}),
      run: Number(raw[4]),
    };
  }

  /** Starts a prepare run, or joins the one running (`leaseMs`: how long a run may hold the job). */
  async beginPrepare(organizationId: string, jobId: string, leaseMs: number): Promise<BeginPrepare> {
    const [kind, run] = (await this.redis.jobBeginPrepare(this.key(organizationId, jobId), Date.now(), leaseMs)) as [string, string?];
    return kind === 'start' || kind === 'join' ? { kind, run: Number(run) } : { kind: kind as 'gone' | 'confirmed' | 'lapsed' };
  }

  /** The run hashed the upload: `reserved` becomes `uploaded`. False when the run no longer holds the job. */
  async recordAudio(organizationId: string, jobId: string, run: number, audio: UploadedAudio): Promise<boolean> {
    return (await this.redis.jobRecordAudio(this.key(organizationId, jobId), run, JSON.stringify(audio))) === 1;
  }

  /** The run's quote replaces any earlier one and the job is `prepared`, unless confirmed or taken over meanwhile. */
  async finishPrepare(organizationId: string, jobId: string, run: number, quote: PreparedQuote): Promise<boolean> {
    const key = this.key(organizationId, jobId);
    return (await this.redis.jobFinishPrepare(key, run, JSON.stringify(quote), Date.parse(quote.expiresAt), Date.now())) === 1;
  }

  async releasePrepare(organizationId: string, jobId: string, run: number): Promise<void> {
    await this.redis.jobReleasePrepare(this.key(organizationId, jobId), run);
  }

  /** Takes the quote of a `prepared` job into `confirming` for `holdMs`: of concurrent confirms, one gets it. */
  async beginConfirm(organizationId: string, jobId: string, holdMs: number): Promise<BeginConfirm> {
    const [kind, quote] = (await this.redis.jobBeginConfirm(this.key(organizationId, jobId), Date.now(), holdMs)) as [string, string?];
    return kind === 'taken'
      ? { kind, quote: JSON.parse(quote!) as PreparedQuote }
      : { kind: kind as 'gone' | 'unprepared' | 'confirmed' | 'lapsed' };
  }

  /** The debit committed: `confirmed`, and its upload belongs to the transaction now (out of the sweep). */
  async finishConfirm(organizationId: string, jobId: string, audioKey: string): Promise<void> {
    await this.redis.jobFinishConfirm(this.key(organizationId, jobId), this.uploadsKey(), audioKey);
  }

  /** The debit was refused: back to `prepared`, the quote as it was. */
  async revertConfirm(organizationId: string, jobId: string): Promise<void> {
    await this.redis.jobRevertConfirm(this.key(organizationId, jobId));
  }

  /** Uploads whose URL expired before `before` (ms), oldest first. */
  async expiredUploads(before: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.uploadsKey(), '-inf', before, 'LIMIT', 0, limit);
  }

  async forgetUploads(audioKeys: readonly string[]): Promise<void> {
    if (audioKeys.length) await this.redis.zrem(this.uploadsKey(), ...audioKeys);
  }

  async exists(organizationId: string, jobId: string): Promise<boolean> {
    return (await this.redis.exists(this.key(organizationId, jobId))) === 1;
  }
}
