// No import here: the tracing set-up uses this before any instrumented library (pino among them) may load.

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
