/**
 * The life of one webhook delivery (one event to one endpoint), as an explicit transition table.
 *
 *   pending ──attempt_succeeded──────────────────▶ succeeded
 *   pending ──attempt_failed_retry_scheduled─────▶ pending   (nextAttemptAt set from the schedule)
 *   pending ──attempt_failed_retries_exhausted───▶ failed
 *
 * One more way out of pending, decided in SQL (store/deliveries.ts closeDuplicatesOf, so no
 * TypeScript twin here): when another delivery of the same event succeeds, a pending one becomes
 * succeeded without an attempt of its own, `delivered_by` naming that delivery
 * (docs/webhook-delivery.md): the receiver has the event and must not get it again.
 *
 * succeeded and failed are final: nothing moves a finished delivery. Redelivery (the dashboard
 * button) does not reopen one either: like BTCPay Server, it creates a NEW pending delivery of
 * the same event (same webhook-id, so receivers can deduplicate) whose `redeliveryOf` names the
 * delivery it was asked from, leaving that one's history as it was. It is allowed from every
 * state, pending included: a merchant who fixed their endpoint need not wait hours for the
 * next scheduled retry.
 */
import type { AttemptOutcome, RandomSource, RetrySchedule } from './retry-schedule';

export type DeliveryState = 'pending' | 'succeeded' | 'failed';

export type DeliveryEvent =
  | { type: 'attempt_succeeded'; at: Date }
  | { type: 'attempt_failed_retry_scheduled'; at: Date; nextAttemptAt: Date }
  | { type: 'attempt_failed_retries_exhausted'; at: Date };

export type DeliveryEventType = DeliveryEvent['type'];

/** Every legal transition; a (state, event) pair not listed here is refused. */
export const DELIVERY_TRANSITIONS: {
  readonly [S in DeliveryState]: Readonly<Partial<Record<DeliveryEventType, DeliveryState>>>;
} = {
  pending: {
    attempt_succeeded: 'succeeded',
    attempt_failed_retry_scheduled: 'pending',
    attempt_failed_retries_exhausted: 'failed',
  },
  succeeded: {},
  failed: {},
};

/** States a delivery can be redelivered from (each redelivery is a new delivery). */
export const REDELIVERABLE_STATES: ReadonlySet<DeliveryState> = new Set<DeliveryState>(['pending', 'succeeded', 'failed']);

export interface WebhookDelivery {
  readonly id: string;
  readonly projectId: string;
  /** The event id: the webhook-id header of every attempt, redeliveries included. */
  readonly eventId: string;
  readonly eventType: string;
  readonly state: DeliveryState;
  /** Attempts made so far; the next one is number attemptCount + 1. */
  readonly attemptCount: number;
  /** When the next attempt is due; null once the delivery is finished. */
  readonly nextAttemptAt: Date | null;
  readonly lastAttemptAt: Date | null;
  /** The delivery this one was redelivered from; null for the first delivery of an event. */
  readonly redeliveryOf: string | null;
  readonly createdAt: Date;
  readonly finishedAt: Date | null;
}

export class IllegalDeliveryTransitionError extends Error {
  constructor(
    readonly deliveryId: string,
    readonly from: DeliveryState,
    readonly event: DeliveryEventType | 'redeliver',
  ) {
    super(`delivery ${deliveryId}: ${event} is not allowed in state ${from}`);
    this.name = 'IllegalDeliveryTransitionError';
  }
}

/** The target state, or undefined when the table has no such transition. */
export function deliveryTransition(from: DeliveryState, event: DeliveryEventType): DeliveryState | undefined {
  return DELIVERY_TRANSITIONS[from][event];
}

/** A new delivery of an event, due at once. */
export function newDelivery(params: { id: string; projectId: string; eventId: string; eventType: string; now: Date }): WebhookDelivery {
  return {
    id: params.id,
    projectId: params.projectId,
    eventId: params.eventId,
    eventType: params.eventType,
    state: 'pending',
    attemptCount: 0,
    nextAttemptAt: params.now,
    lastAttemptAt: null,
    redeliveryOf: null,
    createdAt: params.now,
    finishedAt: null,
  };
}

/**
 * The delivery after an attempt event. Generic so a store row with more columns (url, body…)
 * keeps them. @throws IllegalDeliveryTransitionError when the table does not allow it.
 */
export function applyDeliveryEvent<D extends WebhookDelivery>(delivery: D, event: DeliveryEvent): D {
  const to = deliveryTransition(delivery.state, event.type);
  if (to === undefined) throw new IllegalDeliveryTransitionError(delivery.id, delivery.state, event.type);
  const attempted = { attemptCount: delivery.attemptCount + 1, lastAttemptAt: event.at };
  switch (event.type) {
    case 'attempt_succeeded':
    case 'attempt_failed_retries_exhausted':
      return { ...delivery, ...attempted, state: to, nextAttemptAt: null, finishedAt: event.at };
    case 'attempt_failed_retry_scheduled':
      return { ...delivery, ...attempted, state: to, nextAttemptAt: event.nextAttemptAt };
  }
}

/**
 * The event for the attempt just made (number delivery.attemptCount + 1), from its classified
 * outcome and the retry schedule: success, a retry at the jittered time, or the end.
 */
export function deliveryEventForAttempt(params: {
  delivery: WebhookDelivery;
  outcome: AttemptOutcome;
  schedule: RetrySchedule;
  at: Date;
  random?: RandomSource;
}): DeliveryEvent {
  const { delivery, outcome, schedule, at, random } = params;
  if (outcome.result === 'success') return { type: 'attempt_succeeded', at };
  const nextAttemptAt = schedule.nextAttemptAt(delivery.attemptCount + 1, at, random);
  return nextAttemptAt === null
    ? { type: 'attempt_failed_retries_exhausted', at }
    : { type: 'attempt_failed_retry_scheduled', at, nextAttemptAt };
}

/**
 * A new pending delivery of the same event, pointing at `original`. Other columns of a store
 * row (url, body…) are copied; the attempt history starts afresh.
 */
export function redeliver<D extends WebhookDelivery>(original: D, params: { id: string; now: Date }): D {
  if (!REDELIVERABLE_STATES.has(original.state)) throw new IllegalDeliveryTransitionError(original.id, original.state, 'redeliver');
  return {
    ...original,
    id: params.id,
    state: 'pending',
    attemptCount: 0,
    nextAttemptAt: params.now,
    lastAttemptAt: null,
    redeliveryOf: original.id,
    createdAt: params.now,
    finishedAt: null,
  };
}
