import { fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { SecretBox } from '../../shared/crypto/secret-box';
import { accessCodeAad } from '../../shared/webhooks/service';
import { signWebhook } from '../../shared/webhooks/signature';
import { reply } from './ipc';
import { median } from './stats';

/**
 * What a kernel entry costs on this machine, and what it adds to the user work beside it (docs/performance.md,
 * section 37), in a process of its own doing nothing else. The work is a delivery's own computation as the worker
 * does it (shared/webhooks/delivery.ts: open the sealed access code, serialize the payload, sign it, build the
 * headers), without I/O. The entry is `getppid` (`process.ppid` asks the kernel each time), which does no work in
 * the kernel: what the pair costs beyond the two timed apart is the cost of entering and leaving the kernel, paid by
 * the work after the entry or by the entry after the work (the probe does not tell which). Rounds of each shape
 * alternate, and each figure is the median of the rounds. Answers over IPC.
 */
export interface KernelEntryCost {
  /** One `getppid`, ns. */
  readonly entryNs: number;
  /** The delivery-shaped computation back to back, ns each. */
  readonly workNs: number;
  /** The same computation with one kernel entry after each, ns each, less the entry's own time back to back: the pair's extra, whichever of the two pays it. */
  readonly workAfterEntryNs: number;
}

const box = new SecretBox(randomBytes(32));
const secret = randomBytes(32);
const eventId = randomUUID();
const sealed = box.seal(Buffer.from(`atc_${randomBytes(32).toString('hex')}`), accessCodeAad(eventId));
const payload: Record<string, unknown> = {
  id: eventId,
  type: 'work.registered',
  created_at: new Date().toISOString(),
  data: { work_id: randomUUID(), transaction_id: randomUUID(), status: 'confirmed', block_hash: `0x${randomBytes(32).toString('hex')}` },
};
let sink = 0;

function work(): void {
  const copy = { ...payload, access_code: box.open(sealed, accessCodeAad(eventId)).toString() };
  const body = JSON.stringify(copy);
  const timestamp = Math.floor(Date.now() / 1000);
  const headers = {
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(body)),
    'X-Service-Signature': signWebhook(secret, body, timestamp),
    'X-Service-Timestamp': String(timestamp),
    'X-Service-Delivery': eventId,
  };
  sink += headers['Content-Length'].length;
}

const enter = () => (sink += process.ppid);

function timed(n: number, step: () => void): number {
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) step();
  return Number(process.hrtime.bigint() - started) / n;
}

function measureKernelEntry(rounds = 9, n = 5_000): KernelEntryCost {
  const shapes = {
    entry: () => enter(),
    work: () => work(),
    both: () => {
      work();
      enter();
    },
  };
  const times = { entry: [] as number[], work: [] as number[], both: [] as number[] };
  // the first two rounds warm the JIT, not recorded
  for (let r = -2; r < rounds; r++)
    for (const shape of ['entry', 'work', 'both'] as const) {
      const ns = timed(n, shapes[shape]);
      if (r >= 0) times[shape].push(ns);
    }
  const entryNs = median(times.entry);
  if (sink === 0.5) process.stdout.write(''); // keeps the results alive
  return { entryNs, workNs: median(times.work), workAfterEntryNs: median(times.both) - entryNs };
}

/** Runs the measurement in a process of its own (this file, forked) and resolves with its figures. */
export function probeKernelEntry(): Promise<KernelEntryCost> {
  return reply<KernelEntryCost>(fork(__filename, [], { execArgv: ['--import', 'tsx'] }), 'kernel-entry', 'kernel-entry probe');
}

if (require.main === module) process.send!({ type: 'kernel-entry', ...measureKernelEntry() }, () => process.disconnect());
