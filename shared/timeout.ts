/**
 * `promise`, or a rejection with `message` (a function is asked at that moment) once `ms` have passed; the timer is
 * cleared either way. The promise itself goes on: this only stops waiting for it.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string | (() => string)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(typeof message === 'function' ? message() : message)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}
