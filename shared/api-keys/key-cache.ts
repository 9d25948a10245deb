import type { Redis } from '../redis/client';
import type { Config } from '../config';
import type { Principal, Scope } from './types';
import { bucketKey, TAKE_TOKEN_LUA } from '../rate-limit/service';

/**
 * API keys as the web checks them on every request, held in Redis so no request reads PostgreSQL for them.
 * PostgreSQL stays the truth: a record is filled from it on a miss (only if absent: `SET NX`), and whoever
 * changes the truth overwrites the record afterwards, unconditionally, before answering. A fill racing a
 * revocation or a status change therefore never outlives it:
 *
 * - a revoked key's record becomes the marker `revoked` (kept a day; past that, PostgreSQL answers again);
 * - an organization's status has a record of its own, written by every status change;
 * - an active key's record lives 5 minutes and a status 1 minute, bounding what a lost write could leave.
 *
 * One script reads a key's record, its organization's status, and whether this is the key's first use of the
 * minute (`last_used_at` is written at most once a minute), on a rate-limited route takes a token of the
 * organization's bucket, and, when the caller is admitted, makes the request's own write (`AdmittedWrite`:
 * init's upload session), in one round trip. The status's, the bucket's and the write's keys are named from
 * the record, so the script touches keys it is not given: fine on one Redis server, not on a Cluster.
 */
export interface KeyCacheDeps {
  readonly redis: Redis;
  readonly config: Pick<Config, 'redis'>;
}

export interface CachedKey {
  readonly id: string;
  readonly organizationId: string;
  readonly scopes: readonly Scope[];
}

/** A token of the bucket asked for with the key check: taken, or how long until one is available. */
export type TokenOutcome = { readonly taken: true } | { readonly taken: false; readonly waitMs: number };

export type CacheLookup =
  | { readonly kind: 'revoked' }
  | {
      readonly kind: 'found';
      readonly key: CachedKey;
      readonly organizationStatus: string;
      readonly firstUseThisMinute: boolean;
      /** When a token was asked for and could be: taken, or how long until one is available. */
      readonly token?: TokenOutcome;
      /** Whether the admitted write was made. */
      readonly written: boolean;
    }
  | { readonly kind: 'unknown' };

/**
 * Redis commands the key check runs once it admits the caller (an active organization, the scope, a token
 * when one was asked for), before it answers. Their arguments may hold `ADMITTED.organizationId` and
 * `ADMITTED.apiKeyId`, replaced there by the key's: a request can name its own keys before knowing whose it is.
 * The placeholders are a raw control character that JSON.stringify never writes, so no caller's text in a
 * stringified argument can ever be taken for one.
 */
export interface AdmittedWrite {
  /** The scope the caller needs for the write to be made. */
  readonly scope: Scope;
  readonly commands: readonly (readonly string[])[];
}

export const ADMITTED = { organizationId: '\x01o', apiKeyId: '\x01k' } as const;

/** A request's own write offered to the key check, and how the request answers once its caller is known. */
export interface Admission<T> {
  readonly commands: AdmittedWrite['commands'];
  /** `written`: whether the key check made the write; if not (PostgreSQL answered it), `answer` makes it. */
  answer(principal: Principal, written: boolean): Promise<T>;
}

const ACTIVE_TTL_S = 300;
const STATUS_TTL_S = 60;
const REVOKED_TTL_S = 86_400;
const REVOKED = 'revoked';

const recordKey = (prefix: string, hash: Buffer) => `${prefix}:apikey:${hash.toString('hex')}`;
const statusKey = (prefix: string, organizationId: string) => `${prefix}:org-status:${organizationId}`;

// record: "<organization id>|<key id>|<scope>,<scope>"
// ARGV: status key prefix, used key prefix, then for a rate-limited route the bucket key prefix, rate, burst and
// the scope the route needs ('' otherwise). A token is taken only for an active organization's key that has the
// scope: what the bucket counts is unchanged by taking it here. Then the admitted write's scope ('' for none) and
// its commands packed into one argument (`packWrite`), since ioredis spends CPU on each argument of a call.
const LOOKUP = `
local record = redis.call('GET', KEYS[1])
if not record then return false end
if record == '${REVOKED}' then return {'${REVOKED}'} end
local org, id, scopes = string.match(record, '^([^|]+)|([^|]+)|(.*)$')
local status = redis.call('GET', ARGV[1] .. org)
if not status then return false end
local first = redis.call('SET', ARGV[2] .. id, '1', 'NX', 'EX', 60)
local took = -1
local wait = 0
if ARGV[3] ~= '' and status == 'active' and string.find(',' .. scopes .. ',', ',' .. ARGV[6] .. ',', 1, true) then
  local bucket = ARGV[3] .. org
  local rate = tonumber(ARGV[4])
  local burst = tonumber(ARGV[5])
  ${TAKE_TOKEN_LUA}
  took = allowed
end
local wrote = 0
if ARGV[7] ~= '' and status == 'active' and took ~= 0 and string.find(',' .. scopes .. ',', ',' .. ARGV[7] .. ',', 1, true) then
  local mine = { o = org, k = id }
  local packed = ARGV[8]
  local at = 1
  local function item()
    local colon = string.find(packed, ':', at, true)
    local length = colon and string.match(string.sub(packed, at, colon - 1), '^%d+$')
    length = length and tonumber(length)
    if not length or colon + length > #packed then error('malformed admitted write at byte ' .. at) end
    at = colon + length + 1
    return string.sub(packed, colon + 1, colon + length)
  end
  -- all of it read before any of it runs: a malformed write makes no part of itself
  local commands = {}
  while at <= #packed do
    local command = {}
    for a = 1, tonumber(item()) do
      local arg = item()
      command[a] = string.find(arg, '\\1', 1, true) and string.gsub(arg, '\\1([ok])', mine) or arg
    end
    commands[#commands + 1] = command
  end
  for _, command in ipairs(commands) do redis.call(unpack(command)) end
  wrote = 1
end
return {record, status, first and 1 or 0, took, wait, wrote}
`;

/** A token of the organization's bucket, taken with the key check when the route is rate-limited. */
export interface TakeToken {
  readonly perSecond: number;
  readonly burst: number;
  /** Taken only if the key has it (a key without it is refused anyway). */
  readonly scope: Scope;
}

type Scripted = Redis & {
  worksKeyLookup(record: string, ...args: (string | number)[]): Promise<[string, string?, number?, number?, number?, number?] | null>;
};

function scripted(redis: Redis): Scripted {
  if (!('worksKeyLookup' in redis)) redis.defineCommand('worksKeyLookup', { numberOfKeys: 1, lua: LOOKUP });
  return redis as Scripted;
}

/**
 * An admitted write's commands as one script argument: each command its number of arguments, then each argument,
 * every item written `<UTF-8 byte length>:<bytes>`. ioredis spends about 0.4 µs of CPU on each argument of a
 * call; an init's session write as 25 arguments of its own cost the key check twice the CPU of one (a loop of the
 * call against Redis, 64 in flight: 29 against 15 µs a call).
 */
export function packWrite(commands: AdmittedWrite['commands']): string {
  let packed = '';
  for (const command of commands) {
    const count = String(command.length);
    packed += `${count.length}:${count}`;
    for (const arg of command) packed += `${Buffer.byteLength(arg)}:${arg}`;
  }
  return packed;
}

/**
 * The key's record and its organization's status, a token of the bucket when `take` asks for one, and the admitted
 * write, its commands packed by `packWrite` (once per request, though a check may ask twice: key-reads.ts).
 */
export async function lookupPacked(
  deps: KeyCacheDeps,
  hash: Buffer,
  take?: TakeToken,
  write?: { readonly scope: Scope; readonly packed: string },
): Promise<CacheLookup> {
  const prefix = deps.config.redis.prefix;
  const args: (string | number)[] = [`${prefix}:org-status:`, `${prefix}:apikey-used:`];
  if (take) args.push(bucketKey(prefix, ''), take.perSecond, take.burst, take.scope);
  else args.push('', 0, 0, '');
  if (write) args.push(write.scope, write.packed);
  else args.push('', '');
  const found = await scripted(deps.redis).worksKeyLookup(recordKey(prefix, hash), ...args);
  if (!found) return { kind: 'unknown' };
  if (found[0] === REVOKED) return { kind: 'revoked' };
  const [organizationId, id, scopes] = found[0].split('|') as [string, string, string];
  const took = found[3];
  return {
    kind: 'found',
    key: { id, organizationId, scopes: scopes.split(',') as Scope[] },
    organizationStatus: found[1]!,
    firstUseThisMinute: found[2] === 1,
    ...(took === 1 ? { token: { taken: true as const } } : took === 0 ? { token: { taken: false as const, waitMs: found[4]! } } : {}),
    written: found[5] === 1,
  };
}

/** A lookup PostgreSQL answered, kept for the next requests unless a change got there first. */
export async function fillKey(deps: KeyCacheDeps, hash: Buffer, key: CachedKey | 'revoked', organizationStatus?: string): Promise<void> {
  const prefix = deps.config.redis.prefix;
  const multi = deps.redis.multi();
  if (key === REVOKED) multi.set(recordKey(prefix, hash), REVOKED, 'EX', REVOKED_TTL_S, 'NX');
  else {
    multi.set(recordKey(prefix, hash), `${key.organizationId}|${key.id}|${key.scopes.join(',')}`, 'EX', ACTIVE_TTL_S, 'NX');
    if (organizationStatus) multi.set(statusKey(prefix, key.organizationId), organizationStatus, 'EX', STATUS_TTL_S, 'NX');
  }
  await multi.exec();
}

/** After a revocation has committed: the key's record says so, whatever a fill wrote meanwhile. */
export async function recordRevoked(deps: KeyCacheDeps, hash: Buffer): Promise<void> {
  await deps.redis.set(recordKey(deps.config.redis.prefix, hash), REVOKED, 'EX', REVOKED_TTL_S);
}

/** After a status change has committed: every web process sees it from the next request. */
export async function recordOrganizationStatus(deps: KeyCacheDeps, organizationId: string, status: string): Promise<void> {
  await deps.redis.set(statusKey(deps.config.redis.prefix, organizationId), status, 'EX', STATUS_TTL_S);
}
