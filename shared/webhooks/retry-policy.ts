/**
 * docs/api.md#delivery-and-retries: the wait before retry `index` (0 for the first retry) is that step of the schedule. A
 * `Retry-After` from the receiver lengthens the wait up to the following step of the schedule, so a receiver
 * can slow us down but cannot park a delivery for longer than the schedule would; it never shortens the wait.
 */
export function retryDelaySeconds(schedule: readonly number[], index: number, retryAfterSeconds?: number): number {
  const at = (i: number) => schedule[Math.min(Math.max(i, 0), schedule.length - 1)] ?? 0;
  const step = at(index);
  if (retryAfterSeconds === undefined) return step;
  return Math.max(step, Math.min(retryAfterSeconds, at(index + 1)));
}

/** `Retry-After` as seconds from `now`: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  if (typeof value !== 'string' || value.trim() === '') return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  if (!/^[A-Za-z]{3}/.test(text)) return undefined; // an HTTP date starts with the day's name
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/**
 * A delivery job makes one attempt per run, as many runs as the schedule has steps plus one; a job found
 * stalled (its worker died mid-attempt) may run again as often as the schedule has steps.
 */
export const deliveryAttempts = (schedule: readonly number[]) => schedule.length + 1;
export const deliveryStallAllowance = (schedule: readonly number[]) => schedule.length;

/** A retryable attempt failed; `delayMs` (the schedule, lengthened by a Retry-After) is read by the backoff. */
export class RetryDelivery extends Error {
  override readonly name = 'RetryDelivery';
  constructor(
    message: string,
    readonly delayMs: number,
  ) {
    super(message);
  }
}

/**
 * The `schedule` backoff of delivery jobs: the delay the failed run asked for, else the step of the retry
 * schedule for the attempt that just failed (counting the retries made before the job, when it follows a
 * batch). Set on every worker; only delivery jobs use the `schedule` type.
 */
export const scheduleBackoff =
  (schedule: readonly number[]) => (attemptsMade: number, _type?: string, err?: Error, job?: { data?: { retriesMade?: number } }) => {
    if (err instanceof RetryDelivery) return err.delayMs;
    return retryDelaySeconds(schedule, attemptsMade - 1 + (job?.data?.retriesMade ?? 0)) * 1000;
  };
