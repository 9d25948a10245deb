import pino, { type Logger, type DestinationStream } from 'pino';

export type { Logger };
export { safeUrl } from './safe-url';

/**
 * Paths that may hold a credential anywhere in a logged object. pino replaces them before
 * serialisation, so a careless `log.info({ key })` still cannot leak a token or a secret.
 */
const REDACT = [
  'authorization',
  'token',
  'session_token',
  'webhook_secret',
  'secret',
  'seed',
  'password',
  'access_code',
  '*.authorization',
  '*.token',
  '*.session_token',
  '*.webhook_secret',
  '*.secret',
  '*.seed',
  '*.password',
  '*.access_code',
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'works-api' },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}
