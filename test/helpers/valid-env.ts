import { randomBytes } from 'node:crypto';
import type { Env } from '../../shared/config';

/** The smallest environment `loadConfig` accepts (one server's Redis, the testnet), for unit tests of configuration. */
export const validEnv = (): Env => ({
  DATABASE_URL: 'postgres://localhost/x',
  REDIS_URL: 'redis://localhost:6379',
  S3_BUCKET: 'b',
  S3_ACCESS_KEY_ID: 'a',
  S3_SECRET_ACCESS_KEY: 's',
  CHAIN_TESTNET_WS: 'ws://127.0.0.1:9944',
  RELAYER_SEED_TESTNET: '//Alice',
  SECRETS_KEY: randomBytes(32).toString('base64'),
  OIDC_ISSUER: 'https://idp',
  OIDC_AUDIENCE: 'works-api',
  OIDC_JWKS_URL: 'https://idp/jwks',
});
