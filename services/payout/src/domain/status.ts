/**
 * Payout stages and the one table of allowed transitions (docs/architecture.md#payouts; services/payout/README.md "Claim before sending"), with what
 * each one does to the ledger and which event it emits:
 *
 *   (new)                --request-->        AwaitingVerification  hold     payout.requested (the code is emailed by RPC, never an event)
 *   AwaitingVerification --verify-->         Pending               —        payout.verified
 *   AwaitingVerification --cancel-->         Cancelled             release  payout.cancelled reason "user"
 *   AwaitingVerification --exhaust_attempts--> Cancelled           release  payout.cancelled reason "attempts_exhausted"
 *   AwaitingVerification --expire_code-->    Cancelled             release  payout.cancelled reason "code_expired"
 *   Pending              --cancel-->         Cancelled             release  payout.cancelled reason "user"
 *   Pending              --claim-->          Sending               —        —
 *   Pending              --reject-->         Rejected              release  payout.rejected
 *   Sending              --complete-->       Completed             debit    payout.completed
 *   Sending              --reject-->         Rejected              release  payout.rejected
 *
 * `Sending` is a Pending payout an operator (or processor) has claimed: coins may be on their way,
 * so the merchant can no longer cancel it (409 payout_in_flight) — cancelling then would release
 * the hold for money that is leaving, and the merchant would be paid twice. Publicly it is still
 * `Pending` (with `processing: true`); it is stored as status Pending with `claimed_at` set.
 *
 * Anything else is refused (Completed, Rejected and Cancelled are terminal). The store derives its
 * SQL guards from this table (`sourceStages`), so the rule lives in one place. Which of these
 * events become webhooks is the notifier's table; a test checks the two agree.
 */

/** Public spellings, also stored as-is in the database. */
export const PAYOUT_STATUSES = ['AwaitingVerification', 'Pending', 'Completed', 'Rejected', 'Cancelled'] as const;
export type PayoutStatusName = (typeof PAYOUT_STATUSES)[number];

/** The stages of the transition table: the public statuses, Pending split by whether it was claimed. */
export const PAYOUT_STAGES = ['AwaitingVerification', 'Pending', 'Sending', 'Completed', 'Rejected', 'Cancelled'] as const;
export type PayoutStage = (typeof PAYOUT_STAGES)[number];

/** The stage of a stored payout: its status, and for a Pending one whether it has been claimed. */
export function stageOf(payout: { status: PayoutStatusName; claimed_at: Date | null }): PayoutStage {
  return payout.status === 'Pending' && payout.claimed_at !== null ? 'Sending' : payout.status;
}

/** How a treasury processor names itself when it claims a payout: `processor:<network>` (docs/treasury.md#processor). */
export const PROCESSOR_CLAIM_PREFIX = 'processor:';

export function processorClaimId(network: string): string {
  return `${PROCESSOR_CLAIM_PREFIX}${network}`;
}

/**
 * A payout the treasury's processor claimed is finished by the chain only: its signed transaction
 * may be in a mempool (or stored, to be broadcast again after a restart), so an operator's Reject
 * would release a hold whose coins still leave, and a Complete by hand would record another
 * transaction than the one the processor sends (docs/treasury.md#processor).
 */
export function isSentByProcessor(payout: { claimed_by: string | null }): boolean {
  return payout.claimed_by?.startsWith(PROCESSOR_CLAIM_PREFIX) ?? false;
}

/** The status a stage is stored and shown as. */
export function statusOfStage(stage: PayoutStage): PayoutStatusName {
  return stage === 'Sending' ? 'Pending' : stage;
}

export const PAYOUT_TRIGGERS = ['verify', 'cancel', 'exhaust_attempts', 'expire_code', 'claim', 'unclaim', 'complete', 'reject'] as const;
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
  to: PayoutStage;
  ledger: LedgerEffect;
  /** null: the change is internal (a claim), no event. */
  event: PayoutEventType | null;
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

export const TRANSITIONS: Readonly<Record<PayoutStage, Readonly<Partial<Record<PayoutTrigger, Transition>>>>> = {
  AwaitingVerification: {
    verify: { to: 'Pending', ledger: 'none', event: 'payout.verified' },
    cancel: cancelled('user'),
    exhaust_attempts: cancelled('attempts_exhausted'),
    expire_code: cancelled('code_expired'),
  },
  Pending: {
    cancel: cancelled('user'),
    claim: { to: 'Sending', ledger: 'none', event: null },
    reject: { to: 'Rejected', ledger: 'release', event: 'payout.rejected' },
  },
  Sending: {
    // Only a UTXO processor whose signer refused the batch before any version of it was signed:
    // nothing exists that could pay it (docs/treasury.md#signer-refusals).
    unclaim: { to: 'Pending', ledger: 'none', event: null },
    complete: { to: 'Completed', ledger: 'debit', event: 'payout.completed' },
    // Only when nothing was sent (the operator says so); the hold is released.
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
export function transition(from: PayoutStage, trigger: PayoutTrigger): Transition | undefined {
  return TRANSITIONS[from][trigger];
}

/** Every stage from which `trigger` is allowed (for the SQL guards). */
export function sourceStages(trigger: PayoutTrigger): PayoutStage[] {
  return PAYOUT_STAGES.filter((stage) => transition(stage, trigger) !== undefined);
}

/** The single target stage of `trigger` (every source leads to the same one). */
export function targetStage(trigger: PayoutTrigger): PayoutStage {
  const targets = new Set(sourceStages(trigger).map((from) => transition(from, trigger)?.to));
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
  claim: 'payout_not_pending',
  unclaim: 'payout_not_claimed',
  complete: 'payout_not_pending',
  reject: 'payout_not_pending',
};

/** Refusals that say more than REFUSAL_CODE because of the stage the payout is in. */
const STAGE_REFUSALS: ReadonlyArray<{ from: PayoutStage; trigger: PayoutTrigger; code: string; reason: string }> = [
  {
    from: 'Sending',
    trigger: 'cancel',
    code: 'payout_in_flight',
    reason: 'payout is being sent: an operator has claimed it and the coins may already be on their way, so it can no longer be cancelled',
  },
  {
    from: 'Pending',
    trigger: 'complete',
    code: 'payout_not_claimed',
    reason: 'payout is Pending but not claimed: claim it (Start sending) before sending the coins, then complete it',
  },
  { from: 'Sending', trigger: 'claim', code: 'payout_already_claimed', reason: 'payout is already being sent: another operator (or the processor) claimed it' },
  { from: 'Pending', trigger: 'unclaim', code: 'payout_not_claimed', reason: 'payout is Pending and not claimed: there is no claim to release' },
];

export type Decision = { ok: true; transition: Transition } | { ok: false; code: string; reason: string };

/** Whether `trigger` may happen to a payout in `from`, with the refusal's code and reason. */
export function decide(from: PayoutStage, trigger: PayoutTrigger): Decision {
  const found = transition(from, trigger);
  if (found) return { ok: true, transition: found };
  const special = STAGE_REFUSALS.find((r) => r.from === from && r.trigger === trigger);
  if (special) return { ok: false, code: special.code, reason: special.reason };
  const allowed = [...new Set(sourceStages(trigger).map(statusOfStage))].join(' or ');
  const verb: Record<PayoutTrigger, string> = {
    verify: 'verified',
    cancel: 'cancelled',
    exhaust_attempts: 'verified',
    expire_code: 'verified',
    claim: 'claimed',
    unclaim: 'released from its claim',
    complete: 'completed',
    reject: 'rejected',
  };
  return { ok: false, code: REFUSAL_CODE[trigger], reason: `payout is ${statusOfStage(from)}; only a payout in ${allowed} can be ${verb[trigger]}` };
}
