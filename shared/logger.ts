import pino, { type Logger, type DestinationStream } from 'pino';

export type { Logger };

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

/** Drops credentials carried in a query string (`?access_token=`) before a URL is logged. */
export function safeUrl(url: string): string {
  return url.replace(/([?&](?:access_token|token|X-Amz-Signature|X-Amz-Credential)=)[^&]*/gi, '$1[redacted]');
}
