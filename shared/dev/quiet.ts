/**
 * Under `npm run dev` only: notices of dependencies that are not the user's concern are kept off the terminal,
 * each by its library's own switch where it has one, else by a match on that one message. Production, the
 * tests and the CLI print them as before.
 */

/**
 * The AWS SDK v3 warns once per process (a 10-line `NodeVersionSupportWarning`) that its releases after January
 * 2027 will need Node 22: a note for whoever upgrades the dependency, not for someone starting the service on
 * the Node 20 it supports. Its own switch turns it off; a value the user set is kept.
 */
export const AWS_NODE_VERSION_SWITCH = 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED';

/**
 * `@polkadot/api` warns, on every connection to the embedded chain, that the runtime's Metadata API is not
 * available and that it reads the metadata over `state_getMetadata` instead: which works, and is what
 * chopsticks serves. Its logger (`@polkadot/util`'s `logger('api/init')`) has no switch for warnings; it calls
 * `console.warn(date, '       API/INIT:', message)`, so that one message, from that origin, is matched.
 */
export function isMetadataApiNotice(args: readonly unknown[]): boolean {
  const [, origin, message] = args;
  return (
    typeof origin === 'string' &&
    origin.trim() === 'API/INIT:' &&
    typeof message === 'string' &&
    message.startsWith('MetadataApi not available')
  );
}

/** Applies both, for this process (the dev runner runs the web and every worker in it). */
export function quietDependencyNotices(env: NodeJS.ProcessEnv = process.env): void {
  env[AWS_NODE_VERSION_SWITCH] ??= 'true';
  const warn = console.warn.bind(console);
  console.warn = (...args: unknown[]) => {
    if (!isMetadataApiNotice(args)) warn(...args);
  };
}
