/** Waiting on asynchronous outcomes in service tests: a call's rejection, a condition, a pause. */
import { errorFacts } from '@coinvoice/runtime';

/** The error facts of a rejected call (fails the test when it resolves). */
export async function rejection(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (err) {
    return errorFacts(err);
  }
  throw new Error('expected the call to fail, but it succeeded');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` every 25 ms until it answers a value (not undefined or false), or times out. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * Rate-limit windows are fixed and aligned to the epoch (runtime rate-limit.ts): a test that counts
 * calls up to a limit and starts just before a window ends sees the count restart half-way (a CI
 * run crossed 19:00:00 and got 401 where 429 was due). When fewer than `marginMs` are left of the
 * current window of `windowSeconds`, this waits until the next one has begun.
 */
export async function awayFromWindowEdge(windowSeconds: number, marginMs = 60_000): Promise<void> {
  const windowMs = windowSeconds * 1_000;
  const left = windowMs - (Date.now() % windowMs);
  if (left < marginMs) await sleep(left + 100);
}
