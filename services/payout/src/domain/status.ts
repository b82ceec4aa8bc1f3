/**
 * Payout status and the one table of allowed transitions (DESIGN.md §5), with what each one does to
 * the ledger and which event it emits:
 *
 *   (new)                --request-->        AwaitingVerification  hold     payout.requested (the code is emailed by RPC, never an event)
 *   AwaitingVerification --verify-->         Pending               —        payout.verified
 *   AwaitingVerification --cancel-->         Cancelled             release  payout.cancelled reason "user"
 *   AwaitingVerification --exhaust_attempts--> Cancelled           release  payout.cancelled reason "attempts_exhausted"
 *   AwaitingVerification --expire_code-->    Cancelled             release  payout.cancelled reason "code_expired"
 *   Pending              --cancel-->         Cancelled             release  payout.cancelled reason "user"
 *   Pending              --complete-->       Completed             debit    payout.completed
 *   Pending              --reject-->         Rejected              release  payout.rejected
 *
 * Anything else is refused (Completed, Rejected and Cancelled are terminal). The store derives its
 * SQL guards from this table (`sourceStatuses`), so the rule lives in one place. Which of these
 * events become webhooks is the notifier's table; a test checks the two agree.
 */

/** Public spellings, also stored as-is in the database. */
export const PAYOUT_STATUSES = ['AwaitingVerification', 'Pending', 'Completed', 'Rejected', 'Cancelled'] as const;
export type PayoutStatusName = (typeof PAYOUT_STATUSES)[number];

export const PAYOUT_TRIGGERS = ['verify', 'cancel', 'exhaust_attempts', 'expire_code', 'complete', 'reject'] as const;
export type PayoutTrigger = (typeof PAYOUT_TRIGGERS)[number];

/** What a transition does to the payout's hold. */
export type LedgerEffect = 'none' | 'release' | 'debit';

export type PayoutEventType =
  | 'payout.requested'
  | 'payout.verified'
  | 'payout.completed'
  | 'payout.rejected'
  | 'payout.cancelled';

/** payout.cancelled's `reason`. */
export type CancelReason = 'user' | 'attempts_exhausted' | 'code_expired';

export interface Transition {
  to: PayoutStatusName;
  ledger: LedgerEffect;
  event: PayoutEventType;
  /** For payout.cancelled. */
  reason?: CancelReason;
}

/** Creation: the only way into the table. */
export const CREATION = {
  to: 'AwaitingVerification',
  ledger: 'hold',
  events: ['payout.requested'],
} as const satisfies { to: PayoutStatusName; ledger: 'hold'; events: readonly PayoutEventType[] };

const cancelled = (reason: CancelReason): Transition => ({ to: 'Cancelled', ledger: 'release', event: 'payout.cancelled', reason });

export const TRANSITIONS: Readonly<Record<PayoutStatusName, Readonly<Partial<Record<PayoutTrigger, Transition>>>>> = {
  AwaitingVerification: {
    verify: { to: 'Pending', ledger: 'none', event: 'payout.verified' },
    cancel: cancelled('user'),
    exhaust_attempts: cancelled('attempts_exhausted'),
    expire_code: cancelled('code_expired'),
  },
  Pending: {
    cancel: cancelled('user'),
    complete: { to: 'Completed', ledger: 'debit', event: 'payout.completed' },
    reject: { to: 'Rejected', ledger: 'release', event: 'payout.rejected' },
  },
  Completed: {},
  Rejected: {},
  Cancelled: {},
};

export function isPayoutStatus(value: unknown): value is PayoutStatusName {
  return typeof value === 'string' && (PAYOUT_STATUSES as readonly string[]).includes(value);
}

/** The transition `trigger` makes from `from`, or undefined when the table refuses it. */
export function transition(from: PayoutStatusName, trigger: PayoutTrigger): Transition | undefined {
  return TRANSITIONS[from][trigger];
}

/** Every status from which `trigger` is allowed (for SQL guards such as `status = any(…)`). */
export function sourceStatuses(trigger: PayoutTrigger): PayoutStatusName[] {
  return PAYOUT_STATUSES.filter((status) => transition(status, trigger) !== undefined);
}

/** The single target status of `trigger` (every source leads to the same one). */
export function targetStatus(trigger: PayoutTrigger): PayoutStatusName {
  const targets = new Set(sourceStatuses(trigger).map((from) => transition(from, trigger)?.to));
  const [to, ...others] = [...targets];
  if (to === undefined || others.length > 0) throw new Error(`the transition table has no single target status for ${trigger}`);
  return to;
}

/** The stable error code a refused trigger answers with (all 409, FailedPrecondition). */
export const REFUSAL_CODE: Readonly<Record<PayoutTrigger, string>> = {
  verify: 'payout_not_verifiable',
  cancel: 'payout_not_cancellable',
  exhaust_attempts: 'payout_not_verifiable',
  expire_code: 'payout_not_verifiable',
  complete: 'payout_not_pending',
  reject: 'payout_not_pending',
};

export type Decision = { ok: true; transition: Transition } | { ok: false; code: string; reason: string };

/** Whether `trigger` may happen to a payout in `from`, with the refusal's code and reason. */
export function decide(from: PayoutStatusName, trigger: PayoutTrigger): Decision {
  const found = transition(from, trigger);
  if (found) return { ok: true, transition: found };
  const allowed = sourceStatuses(trigger).join(' or ');
  const verb: Record<PayoutTrigger, string> = {
    verify: 'verified',
    cancel: 'cancelled',
    exhaust_attempts: 'verified',
    expire_code: 'verified',
    complete: 'completed',
    reject: 'rejected',
  };
  return { ok: false, code: REFUSAL_CODE[trigger], reason: `payout is ${from}; only a payout in ${allowed} can be ${verb[trigger]}` };
}
