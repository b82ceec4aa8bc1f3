/**
 * When a webhook delivery is attempted again, and what counts as a successful attempt
 * (docs/architecture.md#webhook-delivery: a 2xx within 10 s; otherwise retry with backoff and jitter).
 *
 * A schedule is the list of waits between attempts: "5s,5m,30m,2h,5h,10h,10h" means the first
 * attempt at once, then 7 retries, 8 attempts in all. Each wait is stretched or shrunk by a random
 * jitter of ±jitterRatio (default ±20%), so endpoints that fail together (an outage) are not all
 * retried in the same second afterwards. Waits are never negative.
 */
import { parseDurationMs } from '@coinvoice/runtime';

export const DEFAULT_RETRY_SCHEDULE = '5s,5m,30m,2h,5h,10h,10h';
export const DEFAULT_JITTER_RATIO = 0.2;
/** An attempt that has not completed with a 2xx within this time has failed. */
export const DELIVERY_TIMEOUT_MS = 10_000;

const MAX_RETRIES = 30;
const MAX_DELAY_MS = 7 * 86_400_000; // a week

/** A source of uniform numbers in [0, 1), like Math.random; tests pass a fixed one. */
export type RandomSource = () => number;

export class RetryScheduleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RetryScheduleError';
  }
}

export interface RetrySchedule {
  /** The waits before retry 1, 2, …, in milliseconds, before jitter. Never decreasing. */
  readonly baseDelaysMs: readonly number[];
  readonly jitterRatio: number;
  /** Attempts in all: the immediate one plus one per delay. */
  readonly maxAttempts: number;
  /** The range the jittered wait after attempt `failedAttempt` falls in; null when none follows. */
  delayBoundsMs(failedAttempt: number): { min: number; max: number } | null;
  /**
   * When to make the next attempt after attempt number `failedAttempt` (1 = the first, immediate
   * one) failed at `now`; null when that was the last attempt and the delivery has failed.
   */
  nextAttemptAt(failedAttempt: number, now: Date, random?: RandomSource): Date | null;
}

/** A schedule from explicit waits in milliseconds. */
export function retrySchedule(baseDelaysMs: readonly number[], options: { jitterRatio?: number } = {}): RetrySchedule {
  const jitterRatio = options.jitterRatio ?? DEFAULT_JITTER_RATIO;
  if (!(jitterRatio >= 0 && jitterRatio < 1)) throw new RetryScheduleError(`jitter ratio must be in [0, 1), got ${jitterRatio}`);
  if (baseDelaysMs.length > MAX_RETRIES) throw new RetryScheduleError(`at most ${MAX_RETRIES} retries, got ${baseDelaysMs.length}`);
  baseDelaysMs.forEach((delay, index) => {
    if (!Number.isSafeInteger(delay) || delay <= 0 || delay > MAX_DELAY_MS) {
      throw new RetryScheduleError(`delay ${index + 1} must be a whole number of ms from 1 to ${MAX_DELAY_MS}, got ${delay}`);
    }
    const previous = baseDelaysMs[index - 1];
    if (previous !== undefined && delay < previous) {
      throw new RetryScheduleError(`delay ${index + 1} (${delay} ms) is shorter than delay ${index} (${previous} ms): delays must not decrease`);
    }
  });
  const delays = Object.freeze([...baseDelaysMs]);

  const baseAfter = (failedAttempt: number): number | undefined => {
    if (!Number.isSafeInteger(failedAttempt) || failedAttempt < 1) {
      throw new RangeError(`attempt numbers start at 1, got ${failedAttempt}`);
    }
    return delays[failedAttempt - 1];
  };

  return {
    baseDelaysMs: delays,
    jitterRatio,
    maxAttempts: delays.length + 1,
    delayBoundsMs(failedAttempt) {
      const base = baseAfter(failedAttempt);
      if (base === undefined) return null;
      return { min: Math.round(base * (1 - jitterRatio)), max: Math.round(base * (1 + jitterRatio)) };
    },
    nextAttemptAt(failedAttempt, now, random = Math.random) {
      const base = baseAfter(failedAttempt);
      if (base === undefined) return null;
      const r = random();
      if (!(r >= 0 && r < 1)) throw new RangeError(`random source must return a number in [0, 1), got ${r}`);
      // Uniform in [base·(1−ratio), base·(1+ratio)); with ratio < 1 never negative.
      const delay = Math.round(base * (1 + jitterRatio * (2 * r - 1)));
      return new Date(now.getTime() + delay);
    },
  };
}

/**
 * Parses "5s,5m,30m,2h,5h,10h,10h" (units ms, s, m, h, d; whole numbers; spaces around commas
 * allowed) into a schedule. Meant for an environment variable, so errors say what is wrong where.
 */
export function parseRetrySchedule(text: string, options: { jitterRatio?: number } = {}): RetrySchedule {
  const quoted = JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
  if (text.trim() === '') throw new RetryScheduleError(`retry schedule is empty: expected delays like "${DEFAULT_RETRY_SCHEDULE}"`);
  const delays = text.split(',').map((entry, index) => {
    const delayMs = parseDurationMs(entry);
    if (delayMs === undefined) {
      throw new RetryScheduleError(
        `retry schedule ${quoted}: entry ${index + 1} ${JSON.stringify(entry.trim())} is not a duration like 500ms, 5s, 5m, 2h or 1d`,
      );
    }
    return delayMs;
  });
  try {
    return retrySchedule(delays, options);
  } catch (error) {
    if (error instanceof RetryScheduleError) throw new RetryScheduleError(`retry schedule ${quoted}: ${error.message}`);
    throw error;
  }
}

export const defaultRetrySchedule: RetrySchedule = parseRetrySchedule(DEFAULT_RETRY_SCHEDULE);

/** What happened on one attempt, as the HTTP delivery code observed it. */
export type AttemptResult =
  | { kind: 'response'; status: number; durationMs: number }
  | { kind: 'timeout'; durationMs: number }
  | { kind: 'connection_error'; durationMs: number; error: string }
  | { kind: 'refused_by_ssrf_guard'; reason: string };

export type AttemptFailure = 'http_status' | 'too_slow' | 'timeout' | 'connection_error' | 'refused_by_ssrf_guard';

/**
 * Every failure is retryable: the schedule alone ends a delivery. Deliberately that includes
 * 410 Gone (docs/architecture.md#webhook-delivery says any non-2xx is retried): a proxy or a half-deployed receiver can
 * answer 410 by mistake, and dropping an invoice.paid over it costs a merchant more than a few
 * more requests to an endpoint that really is gone. 3xx is a failure too (redirects are not
 * followed: a redirect could point the request past the SSRF guard).
 */
export type AttemptOutcome = { result: 'success' } | { result: 'retryable_failure'; failure: AttemptFailure; detail: string };

export function classifyAttempt(attempt: AttemptResult, limitMs: number = DELIVERY_TIMEOUT_MS): AttemptOutcome {
  switch (attempt.kind) {
    case 'response': {
      const { status, durationMs } = attempt;
      if (status < 200 || status > 299) {
        const detail = status >= 300 && status <= 399 ? `HTTP ${status} (redirects are not followed)` : `HTTP ${status}`;
        return { result: 'retryable_failure', failure: 'http_status', detail };
      }
      // Only reachable if the client's own timeout let a late answer through.
      if (durationMs > limitMs) {
        return { result: 'retryable_failure', failure: 'too_slow', detail: `HTTP ${status} after ${durationMs} ms (limit ${limitMs} ms)` };
      }
      return { result: 'success' };
    }
    case 'timeout':
      return { result: 'retryable_failure', failure: 'timeout', detail: `no complete response within ${DELIVERY_TIMEOUT_MS} ms` };
    case 'connection_error':
      return { result: 'retryable_failure', failure: 'connection_error', detail: attempt.error };
    case 'refused_by_ssrf_guard':
      return { result: 'retryable_failure', failure: 'refused_by_ssrf_guard', detail: `destination refused: ${attempt.reason}` };
  }
}
