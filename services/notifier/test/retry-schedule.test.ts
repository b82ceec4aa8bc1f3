/**
 * The retry schedule (default 5s,5m,30m,2h,5h,10h,10h: 8 attempts), its parser's errors, jitter
 * bounds, and which attempt outcomes count as success.
 */
import fc from 'fast-check';
import {
  classifyAttempt,
  DEFAULT_JITTER_RATIO,
  DEFAULT_RETRY_SCHEDULE,
  defaultRetrySchedule,
  parseRetrySchedule,
  retrySchedule,
  RetryScheduleError,
  type AttemptResult,
} from '../src/domain/retry-schedule';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const now = new Date('2026-04-01T00:00:00Z');
const middle = () => 0.5;

describe('the default schedule', () => {
  test('is 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: 8 attempts in all', () => {
    expect(DEFAULT_RETRY_SCHEDULE).toBe('5s,5m,30m,2h,5h,10h,10h');
    expect(defaultRetrySchedule.baseDelaysMs).toEqual([5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR]);
    expect(defaultRetrySchedule.maxAttempts).toBe(8);
    expect(defaultRetrySchedule.jitterRatio).toBe(DEFAULT_JITTER_RATIO);
  });

  test.each([
    [1, 5 * SECOND],
    [2, 5 * MINUTE],
    [3, 30 * MINUTE],
    [4, 2 * HOUR],
    [5, 5 * HOUR],
    [6, 10 * HOUR],
    [7, 10 * HOUR],
  ])('after attempt %i fails, the next comes %i ms later (no jitter at r = 0.5)', (failed, delay) => {
    expect(defaultRetrySchedule.nextAttemptAt(failed, now, middle)).toEqual(new Date(now.getTime() + delay));
  });

  test('after attempt 8 there is none: the delivery has failed', () => {
    expect(defaultRetrySchedule.nextAttemptAt(8, now, middle)).toBeNull();
    expect(defaultRetrySchedule.nextAttemptAt(9, now, middle)).toBeNull();
    expect(defaultRetrySchedule.delayBoundsMs(8)).toBeNull();
  });

  test.each([0, -1, 1.5, Number.NaN])('attempt number %p is refused', (n) => {
    expect(() => defaultRetrySchedule.nextAttemptAt(n, now, middle)).toThrow(RangeError);
  });

  test('jitter stays within ±20% and reaches both ends', () => {
    expect(defaultRetrySchedule.nextAttemptAt(2, now, () => 0)).toEqual(new Date(now.getTime() + 4 * MINUTE));
    const top = defaultRetrySchedule.nextAttemptAt(2, now, () => 0.999999999);
    expect(top!.getTime() - now.getTime()).toBe(6 * MINUTE);
    expect(defaultRetrySchedule.delayBoundsMs(2)).toEqual({ min: 4 * MINUTE, max: 6 * MINUTE });
  });

  test('uses Math.random when given no random source, within bounds', () => {
    for (let i = 0; i < 100; i++) {
      const delay = defaultRetrySchedule.nextAttemptAt(1, now)!.getTime() - now.getTime();
      expect(delay).toBeGreaterThanOrEqual(4 * SECOND);
      expect(delay).toBeLessThanOrEqual(6 * SECOND);
    }
  });

  test.each([1, -0.1, Number.NaN])('a random source returning %p is refused', (r) => {
    expect(() => defaultRetrySchedule.nextAttemptAt(1, now, () => r)).toThrow(/random source/);
  });
});

describe('parseRetrySchedule', () => {
  test.each([
    ['5s,5m,30m,2h,5h,10h,10h', [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR]],
    [' 100ms , 200ms,1s ', [100, 200, SECOND]],
    ['1d', [24 * HOUR]],
    ['50ms,50ms,50ms', [50, 50, 50]],
  ])('%j', (text, delays) => {
    expect(parseRetrySchedule(text).baseDelaysMs).toEqual(delays);
    expect(parseRetrySchedule(text).maxAttempts).toBe(delays.length + 1);
  });

  test.each([
    ['', /retry schedule is empty/],
    ['   ', /retry schedule is empty/],
    ['5s,5x', /entry 2 "5x" is not a duration like 500ms, 5s, 5m, 2h or 1d/],
    ['5', /entry 1 "5" is not a duration/],
    ['-5s', /entry 1 "-5s" is not a duration/],
    ['1.5h', /entry 1 "1.5h" is not a duration/],
    ['5s,,5m', /entry 2 "" is not a duration/],
    ['5 s', /entry 1 "5 s" is not a duration/],
    ['5S', /entry 1 "5S" is not a duration/],
    ['0s', /delay 1 must be a whole number of ms from 1/],
    ['8d', /delay 1 must be a whole number of ms from 1 to 604800000/],
    ['5m,1m', /delay 2 \(60000 ms\) is shorter than delay 1 \(300000 ms\): delays must not decrease/],
    [Array.from({ length: 31 }, () => '1s').join(','), /at most 30 retries/],
  ])('refuses %j', (text, message) => {
    expect(() => parseRetrySchedule(text)).toThrow(RetryScheduleError);
    expect(() => parseRetrySchedule(text)).toThrow(message);
  });

  test('names the whole setting in its errors', () => {
    expect(() => parseRetrySchedule('5m,1m')).toThrow(/^retry schedule "5m,1m": /);
  });

  test.each([-0.1, 1, 1.5, Number.NaN])('refuses jitter ratio %p', (jitterRatio) => {
    expect(() => parseRetrySchedule('5s', { jitterRatio })).toThrow(/jitter ratio must be in \[0, 1\)/);
  });

  test('jitter ratio 0 gives exact times (compressed schedules in tests)', () => {
    const schedule = parseRetrySchedule('100ms,200ms', { jitterRatio: 0 });
    expect(schedule.nextAttemptAt(1, now, () => 0.99)).toEqual(new Date(now.getTime() + 100));
    expect(schedule.nextAttemptAt(2, now, () => 0)).toEqual(new Date(now.getTime() + 200));
    expect(schedule.nextAttemptAt(3, now, () => 0)).toBeNull();
  });
});

describe('jitter (properties)', () => {
  const unit = fc.constantFrom(['ms', 1], ['s', SECOND], ['m', MINUTE], ['h', HOUR]);
  const delays = fc.array(fc.tuple(fc.integer({ min: 1, max: 100 }), unit), { minLength: 1, maxLength: 30 });
  const ratio = fc.double({ min: 0, max: 0.99, noNaN: true });
  const random = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });

  test('a parsed schedule keeps its delays, non-decreasing, whatever order they were written in', () => {
    fc.assert(
      fc.property(delays, (entries) => {
        const sorted = [...entries].sort(([a, ua], [b, ub]) => a * ua[1] - b * ub[1]);
        const schedule = parseRetrySchedule(sorted.map(([n, [u]]) => `${n}${u}`).join(','));
        expect(schedule.baseDelaysMs).toEqual(sorted.map(([n, [, ms]]) => n * ms));
        schedule.baseDelaysMs.forEach((d, i) => expect(d).toBeGreaterThanOrEqual(schedule.baseDelaysMs[i - 1] ?? 0));
      }),
    );
  });

  test('every jittered delay is within its bounds, never negative, and the schedule ends after maxAttempts', () => {
    fc.assert(
      fc.property(delays, ratio, random, fc.integer({ min: 1, max: 40 }), (entries, jitterRatio, r, attempt) => {
        const base = entries.map(([n, [, ms]]) => n * ms).sort((a, b) => a - b);
        const schedule = retrySchedule(base, { jitterRatio });
        const next = schedule.nextAttemptAt(attempt, now, () => r);
        const bounds = schedule.delayBoundsMs(attempt);
        if (attempt >= schedule.maxAttempts) {
          expect(next).toBeNull();
          expect(bounds).toBeNull();
          return;
        }
        const delay = next!.getTime() - now.getTime();
        const baseDelay = base[attempt - 1]!;
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeGreaterThanOrEqual(bounds!.min);
        expect(delay).toBeLessThanOrEqual(bounds!.max);
        expect(bounds!.min).toBeGreaterThanOrEqual(Math.floor(baseDelay * (1 - jitterRatio)));
        expect(bounds!.max).toBeLessThanOrEqual(Math.ceil(baseDelay * (1 + jitterRatio)));
      }),
    );
  });

  test('the same random source gives the same times', () => {
    fc.assert(
      fc.property(random, fc.integer({ min: 1, max: 7 }), (r, attempt) => {
        expect(defaultRetrySchedule.nextAttemptAt(attempt, now, () => r)).toEqual(defaultRetrySchedule.nextAttemptAt(attempt, now, () => r));
      }),
    );
  });
});

describe('classifyAttempt', () => {
  test.each<[string, AttemptResult, string]>([
    ['200 in 50 ms', { kind: 'response', status: 200, durationMs: 50 }, 'success'],
    ['204', { kind: 'response', status: 204, durationMs: 50 }, 'success'],
    ['299', { kind: 'response', status: 299, durationMs: 50 }, 'success'],
    ['200 at exactly 10 s', { kind: 'response', status: 200, durationMs: 10_000 }, 'success'],
    ['200 after 10 s', { kind: 'response', status: 200, durationMs: 10_001 }, 'too_slow'],
    ['101', { kind: 'response', status: 101, durationMs: 50 }, 'http_status'],
    ['301 (not followed)', { kind: 'response', status: 301, durationMs: 50 }, 'http_status'],
    ['400', { kind: 'response', status: 400, durationMs: 50 }, 'http_status'],
    ['404', { kind: 'response', status: 404, durationMs: 50 }, 'http_status'],
    ['410 Gone (retried like the rest)', { kind: 'response', status: 410, durationMs: 50 }, 'http_status'],
    ['429', { kind: 'response', status: 429, durationMs: 50 }, 'http_status'],
    ['500', { kind: 'response', status: 500, durationMs: 50 }, 'http_status'],
    ['503', { kind: 'response', status: 503, durationMs: 50 }, 'http_status'],
    ['a timeout', { kind: 'timeout', durationMs: 10_000 }, 'timeout'],
    ['a refused connection', { kind: 'connection_error', durationMs: 3, error: 'connect ECONNREFUSED 203.0.113.9:443' }, 'connection_error'],
    ['a destination refused by the SSRF guard', { kind: 'refused_by_ssrf_guard', reason: '10.0.0.1 is private' }, 'refused_by_ssrf_guard'],
  ])('%s', (_name, attempt, expected) => {
    const outcome = classifyAttempt(attempt);
    if (expected === 'success') {
      expect(outcome).toEqual({ result: 'success' });
    } else {
      expect(outcome).toEqual({ result: 'retryable_failure', failure: expected, detail: expect.any(String) });
    }
  });

  test('failure details are readable in the delivery log', () => {
    expect(classifyAttempt({ kind: 'response', status: 302, durationMs: 5 })).toMatchObject({ detail: 'HTTP 302 (redirects are not followed)' });
    expect(classifyAttempt({ kind: 'response', status: 500, durationMs: 5 })).toMatchObject({ detail: 'HTTP 500' });
    expect(classifyAttempt({ kind: 'timeout', durationMs: 10_000 })).toMatchObject({ detail: 'no complete response within 10000 ms' });
    expect(classifyAttempt({ kind: 'refused_by_ssrf_guard', reason: '10.0.0.1 is private' })).toMatchObject({
      detail: 'destination refused: 10.0.0.1 is private',
    });
  });
});
