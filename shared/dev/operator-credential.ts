import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { parseEnvFile, type Env } from '../config';

export const DEV_OPERATOR_USER = 'operator';

export type DevOperatorAccess =
  /** OPERATOR_CREDENTIAL set by the user: theirs, untouched. */
  | { readonly source: 'environment'; readonly username: string }
  /** The development credential: generated on the first start, read back from dev.env on every later one. */
  | { readonly source: 'development'; readonly credential: string; readonly username: string; readonly password: string }
  /** Production: no credential is made up; operator-role tokens (or a configured credential) only. */
  | { readonly source: 'none' };

/**
 * The way into Bull Board (and /metrics) under `npm run dev`. An OPERATOR_CREDENTIAL in the environment wins;
 * otherwise the one an earlier start wrote to `devEnvFile` (`.data/dev.env`, git-ignored, mode 0600) is kept,
 * or a fresh `operator:<random>` is generated for the runner to write there. Never in production.
 */
export async function devOperatorAccess(env: Env, nodeEnv: string, devEnvFile: string): Promise<DevOperatorAccess> {
  const configured = env.OPERATOR_CREDENTIAL;
  if (configured) return { source: 'environment', username: configured.slice(0, Math.max(configured.indexOf(':'), 0)) };
  if (nodeEnv === 'production') return { source: 'none' };
  const kept = await fs.readFile(devEnvFile, 'utf8').then(
    (text) => parseEnvFile(text).OPERATOR_CREDENTIAL,
    () => undefined,
  );
  const credential = kept && kept.indexOf(':') > 0 ? kept : `${DEV_OPERATOR_USER}:${randomBytes(18).toString('base64url')}`;
  const colon = credential.indexOf(':');
  return { source: 'development', credential, username: credential.slice(0, colon), password: credential.slice(colon + 1) };
}
