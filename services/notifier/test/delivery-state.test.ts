/**
 * The delivery state machine: its transition table, whole lives of a delivery on the retry
 * schedule, and redelivery as a new delivery pointing at the one it came from.
 */
import fc from 'fast-check';
import {
  applyDeliveryEvent,
  DELIVERY_TRANSITIONS,
  deliveryEventForAttempt,
  deliveryTransition,
  IllegalDeliveryTransitionError,
  newDelivery,
  redeliver,
  type DeliveryEvent,
  type DeliveryEventType,
  type DeliveryState,
  type WebhookDelivery,
} from '../src/domain/delivery-state';
import { classifyAttempt, defaultRetrySchedule, parseRetrySchedule, type AttemptOutcome } from '../src/domain/retry-schedule';

const t0 = new Date('2026-05-01T10:00:00Z');
const later = (ms: number) => new Date(t0.getTime() + ms);
const fresh = () => newDelivery({ id: 'dlv_1', projectId: 'prj_1', eventId: 'evt_1', eventType: 'invoice.paid', now: t0 });

const events: Record<DeliveryEventType, DeliveryEvent> = {
  attempt_succeeded: { type: 'attempt_succeeded', at: later(1) },
  attempt_failed_retry_scheduled: { type: 'attempt_failed_retry_scheduled', at: later(1), nextAttemptAt: later(5_000) },
  attempt_failed_retries_exhausted: { type: 'attempt_failed_retries_exhausted', at: later(1) },
};

const ok: AttemptOutcome = { result: 'success' };
const http500 = classifyAttempt({ kind: 'response', status: 500, durationMs: 20 });

describe('the transition table', () => {
  // Every (state, event) pair: the expected target, or null where it must be refused.
  test.each<[DeliveryState, DeliveryEventType, DeliveryState | null]>([
    ['pending', 'attempt_succeeded', 'succeeded'],
    ['pending', 'attempt_failed_retry_scheduled', 'pending'],
    ['pending', 'attempt_failed_retries_exhausted', 'failed'],
    ['succeeded', 'attempt_succeeded', null],
    ['succeeded', 'attempt_failed_retry_scheduled', null],
    ['succeeded', 'attempt_failed_retries_exhausted', null],
    ['failed', 'attempt_succeeded', null],
    ['failed', 'attempt_failed_retry_scheduled', null],
    ['failed', 'attempt_failed_retries_exhausted', null],
  ])('%s + %s → %s', (from, event, to) => {
    expect(deliveryTransition(from, event) ?? null).toBe(to);
    const delivery: WebhookDelivery = { ...fresh(), state: from };
    if (to === null) {
      expect(() => applyDeliveryEvent(delivery, events[event])).toThrow(IllegalDeliveryTransitionError);
      expect(() => applyDeliveryEvent(delivery, events[event])).toThrow(`delivery dlv_1: ${event} is not allowed in state ${from}`);
    } else {
      expect(applyDeliveryEvent(delivery, events[event]).state).toBe(to);
    }
  });

  test('lists every state, and only pending has ways out', () => {
    expect(Object.keys(DELIVERY_TRANSITIONS).sort()).toEqual(['failed', 'pending', 'succeeded']);
    expect(DELIVERY_TRANSITIONS.succeeded).toEqual({});
    expect(DELIVERY_TRANSITIONS.failed).toEqual({});
  });
});

describe('applyDeliveryEvent', () => {
  test('a new delivery is pending and due at once', () => {
    expect(fresh()).toEqual({
      id: 'dlv_1', projectId: 'prj_1', eventId: 'evt_1', eventType: 'invoice.paid', state: 'pending', attemptCount: 0,
      nextAttemptAt: t0, lastAttemptAt: null, redeliveryOf: null, createdAt: t0, finishedAt: null,
    });
  });

  test('records each attempt and the next due time, and leaves its input alone', () => {
    const before = fresh();
    const after = applyDeliveryEvent(before, events.attempt_failed_retry_scheduled);
    expect(after).toMatchObject({ state: 'pending', attemptCount: 1, lastAttemptAt: later(1), nextAttemptAt: later(5_000), finishedAt: null });
    expect(before.attemptCount).toBe(0);
    expect(applyDeliveryEvent(after, { type: 'attempt_succeeded', at: later(6_000) })).toMatchObject({
      state: 'succeeded', attemptCount: 2, nextAttemptAt: null, finishedAt: later(6_000),
    });
  });

  test('keeps extra columns of a store row', () => {
    const row = { ...fresh(), url: 'https://hooks.example.com/h', body: '{"a":1}' };
    const after = applyDeliveryEvent(row, events.attempt_succeeded);
    expect(after.url).toBe('https://hooks.example.com/h');
    expect(after.body).toBe('{"a":1}');
  });
});

describe('a delivery on the default schedule', () => {
  function run(outcomes: readonly AttemptOutcome[]): WebhookDelivery {
    let delivery = fresh();
    for (const outcome of outcomes) {
      const at = delivery.nextAttemptAt ?? t0;
      delivery = applyDeliveryEvent(delivery, deliveryEventForAttempt({ delivery, outcome, schedule: defaultRetrySchedule, at, random: () => 0.5 }));
    }
    return delivery;
  }

  test('500, 500, then 200: succeeded after three attempts', () => {
    expect(run([http500, http500, ok])).toMatchObject({ state: 'succeeded', attemptCount: 3, nextAttemptAt: null });
  });

  test('the retries follow the schedule: 5 s, then 5 min', () => {
    expect(run([http500]).nextAttemptAt).toEqual(later(5_000));
    expect(run([http500, http500]).nextAttemptAt).toEqual(later(5_000 + 300_000));
  });

  test('eight failures: failed, with no attempt left', () => {
    const seven = run(Array.from({ length: 7 }, () => http500));
    expect(seven).toMatchObject({ state: 'pending', attemptCount: 7 });
    const eight = run(Array.from({ length: 8 }, () => http500));
    expect(eight).toMatchObject({ state: 'failed', attemptCount: 8, nextAttemptAt: null });
    expect(eight.finishedAt).toEqual(seven.nextAttemptAt);
    expect(() => run(Array.from({ length: 9 }, () => http500))).toThrow(IllegalDeliveryTransitionError);
  });

  test('any run of outcomes ends at the first success or after the last attempt (property)', () => {
    const schedule = parseRetrySchedule('1s,2s,3s');
    fc.assert(
      fc.property(fc.array(fc.boolean(), { minLength: 1, maxLength: 10 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (results, r) => {
        let delivery = fresh();
        for (const [index, succeeded] of results.entries()) {
          if (delivery.state !== 'pending') break;
          const event = deliveryEventForAttempt({ delivery, outcome: succeeded ? ok : http500, schedule, at: later(index), random: () => r });
          delivery = applyDeliveryEvent(delivery, event);
        }
        const firstSuccess = results.indexOf(true);
        const attempts = Math.min(results.length, schedule.maxAttempts, firstSuccess === -1 ? Infinity : firstSuccess + 1);
        expect(delivery.attemptCount).toBe(attempts);
        if (firstSuccess !== -1 && firstSuccess < schedule.maxAttempts) expect(delivery.state).toBe('succeeded');
        else if (results.length >= schedule.maxAttempts) expect(delivery.state).toBe('failed');
        else expect(delivery.state).toBe('pending');
      }),
    );
  });
});

describe('redeliver', () => {
  test.each<DeliveryState>(['pending', 'succeeded', 'failed'])('from %s: a new pending delivery pointing at the original', (state) => {
    const original = { ...fresh(), state, attemptCount: 8, url: 'https://hooks.example.com/h', body: '{"a":1}' };
    const copy = redeliver(original, { id: 'dlv_2', now: later(60_000) });
    expect(copy).toEqual({
      ...original,
      id: 'dlv_2',
      state: 'pending',
      attemptCount: 0,
      nextAttemptAt: later(60_000),
      lastAttemptAt: null,
      redeliveryOf: 'dlv_1',
      createdAt: later(60_000),
      finishedAt: null,
    });
    // Same event, so the same webhook-id; the original keeps its history.
    expect(copy.eventId).toBe(original.eventId);
    expect(original).toMatchObject({ id: 'dlv_1', state, attemptCount: 8, redeliveryOf: null });
  });

  test('a redelivery of a redelivery points at the one it was asked from', () => {
    const second = redeliver(fresh(), { id: 'dlv_2', now: later(1) });
    expect(redeliver(second, { id: 'dlv_3', now: later(2) }).redeliveryOf).toBe('dlv_2');
  });
});
