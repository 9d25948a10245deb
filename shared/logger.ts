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

/** Query parameters whose values are never secret: the only ones a logged URL keeps. */
const LOGGED_PARAMETERS = new Set([
  'network',
  'first',
  'after',
  'version',
  'external_user_ref',
  'activeQueue',
  'status',
  'page',
  'jobsPerPage',
  'EIO',
  'transport',
]);

/**
 * A URL as it may be logged: the value of every query parameter not known to be harmless is replaced, so a
 * credential sent where it does not belong (`?api_key=`, `?access_token=`) never reaches a log.
 */
export function safeUrl(url: string): string {
  const at = url.indexOf('?');
  if (at < 0) return url;
  const query = url
    .slice(at + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq < 0 ? pair : pair.slice(0, eq);
      return eq < 0 || LOGGED_PARAMETERS.has(name) ? pair : `${name}=[redacted]`;
    })
    .join('&');
  return `${url.slice(0, at)}?${query}`;
}
