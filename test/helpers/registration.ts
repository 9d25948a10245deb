import { randomBytes } from 'node:crypto';
import { call, eventually, OWN_CONNECTION, type Reply } from './app';
import type { Resources } from '../../shared/resources';

export const creator = (overrides: Record<string, unknown> = {}) => ({
  full_name: 'Ada Lovelace',
  roles: { author: true, composer: true },
  ipi: '00012345678',
  isni: '000000012146438X',
  email: 'ada@example.test',
  ...overrides,
});

export const initBody = (overrides: Record<string, unknown> = {}) => ({
  network: 'testnet',
  title: '  Symphony for Engines  ',
  filename: 'symphony.wav',
  creators: [creator(), { full_name: 'Charles Babbage', roles: { arranger: true } }],
  ...overrides,
});

/** When S3 stops taking a presigned URL, read from the URL itself: its X-Amz-Date (whole seconds) plus X-Amz-Expires. */
export function urlLapse(url: string): number {
  const query = new URL(url).searchParams;
  const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(query.get('X-Amz-Date') ?? '');
  if (!date) throw new Error(`no X-Amz-Date in ${url}`);
  const [, y, mo, d, h, mi, s] = date.map(Number) as number[];
  return Date.UTC(y!, mo! - 1, d!, h!, mi!, s!) + Number(query.get('X-Amz-Expires')) * 1000;
}

export async function upload(url: string, bytes: Buffer): Promise<Response> {
  return fetch(url, { method: 'PUT', body: bytes as unknown as BodyInit, headers: OWN_CONNECTION });
}

export interface Quoted {
  readonly jobId: string;
  readonly audio: Buffer;
  readonly init: Reply;
  readonly prepare: Reply;
}

export interface Registered extends Quoted {
  readonly confirm: Reply;
}

/** init → PUT → prepare, asserting each step's status: a binding quote, not yet confirmed. */
export async function quote(
  base: string,
  token: string,
  body: Record<string, unknown> = initBody(),
  audio = randomBytes(64 * 1024),
): Promise<Quoted> {
  const init = await call(base, 'POST', '/v1/works/init', { token, body });
  if (init.status !== 200) throw new Error(`init: ${init.status} ${init.text}`);
  const put = await upload(init.body.upload_url, audio);
  if (put.status !== 200) throw new Error(`upload: ${put.status} ${await put.text()}`);
  const prepare = await call(base, 'POST', '/v1/works/prepare', { token, body: { job_id: init.body.job_id } });
  if (prepare.status !== 200) throw new Error(`prepare: ${prepare.status} ${prepare.text}`);
  return { jobId: init.body.job_id, audio, init, prepare };
}

/** init → PUT → prepare → confirm. */
export async function register(
  base: string,
  token: string,
  body: Record<string, unknown> = initBody(),
  audio = randomBytes(64 * 1024),
): Promise<Registered> {
  const quoted = await quote(base, token, body, audio);
  const confirm = await call(base, 'POST', '/v1/works/confirm', { token, body: { job_id: quoted.jobId } });
  return { ...quoted, confirm };
}

export interface Versioned {
  readonly jobId: string;
  readonly init: Reply;
  readonly prepare: Reply;
  readonly confirm: Reply;
}

/**
 * Adds a version to the work `atsId`: metadata only (init) when no audio is given, else with new audio
 * (init-upload, PUT); then prepare and confirm. Asserts init and prepare succeed.
 */
export async function addVersion(
  base: string,
  token: string,
  atsId: number,
  body: Record<string, unknown>,
  audio?: Buffer,
): Promise<Versioned> {
  const path = `/v1/works/${atsId}/versions`;
  const init = await call(base, 'POST', `${path}/${audio ? 'init-upload' : 'init'}`, { token, body });
  if (init.status !== 200) throw new Error(`version init: ${init.status} ${init.text}`);
  if (audio) {
    const put = await upload(init.body.upload_url, audio);
    if (put.status !== 200) throw new Error(`upload: ${put.status} ${await put.text()}`);
  }
  const prepare = await call(base, 'POST', `${path}/prepare`, { token, body: { job_id: init.body.job_id } });
  if (prepare.status !== 200) throw new Error(`version prepare: ${prepare.status} ${prepare.text}`);
  const confirm = await call(base, 'POST', `${path}/confirm`, { token, body: { job_id: init.body.job_id } });
  return { jobId: init.body.job_id, init, prepare, confirm };
}

/** Waits until the transaction is terminal (finalized or failed); returns its row. */
export function settled(ctx: Resources, txId: string, timeoutMs = 120_000): Promise<Record<string, any>> {
  return eventually(
    async () => {
      const row = await ctx.db('transactions').where({ id: txId }).first();
      return row.status === 'finalized' || row.status === 'failed' ? row : undefined;
    },
    `transaction ${txId} to settle`,
    timeoutMs,
  );
}
