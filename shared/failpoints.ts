/**
 * Named crash points for fault-injection tests. A process started with WORKS_FAILPOINT=<name> kills
 * itself with SIGKILL (no cleanup, no last words, like a lost host) the first time it reaches that point.
 * Unset in every real deployment, where a failpoint is one environment lookup.
 */
export type FailpointName = 'chain.batch_signed' | 'chain.in_block' | 'chain.finalized';

export function failpoint(name: FailpointName): void {
  if (process.env.WORKS_FAILPOINT === name) process.kill(process.pid, 'SIGKILL');
}
