/**
 * The payout transition table (docs/architecture.md#payouts) cell by cell — state → trigger → state, ledger effect,
 * event — and then event → webhook: each transition's real event, built from a row in the state it
 * reaches, goes through the notifier's webhook table (services/notifier/src/domain/payloads.ts) and
 * must come out as the webhook the merchant is promised (or, for the code, as no webhook at all),
 * valid against the body the OpenAPI document publishes for it (gateway/src/schemas/webhook-events.ts).
 */
import { randomUUID } from 'node:crypto';
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { WEBHOOK_EVENTS } from '../../../gateway/src/schemas/webhook-events';
import { webhookForEventJson } from '../../notifier/src/domain/payloads';
import {
  CREATION,
  PAYOUT_STAGES,
  PAYOUT_TRIGGERS,
  REFUSAL_CODE,
  TRANSITIONS,
  decide,
  sourceStages,
  stageOf,
  statusOfStage,
  targetStage,
  transition,
  type PayoutStage,
  type PayoutStatusName,
  type PayoutTrigger,
  type Transition,
} from '../src/domain/status';
import { payoutRequestedEvent, transitionEvent } from '../src/events/payout-events';
import type { PayoutRow } from '../src/store/payouts';

type Cell = [PayoutStage, PayoutTrigger, Transition | undefined];

const EXPECTED: Cell[] = [
  ['AwaitingVerification', 'verify', { to: 'Pending', ledger: 'none', event: 'payout.verified' }],
  ['AwaitingVerification', 'cancel', { to: 'Cancelled', ledger: 'release', event: 'payout.cancelled', reason: 'user' }],
  ['AwaitingVerification', 'exhaust_attempts', { to: 'Cancelled', ledger: 'release', event: 'payout.cancelled', reason: 'attempts_exhausted' }],
  ['AwaitingVerification', 'expire_code', { to: 'Cancelled', ledger: 'release', event: 'payout.cancelled', reason: 'code_expired' }],
  ['AwaitingVerification', 'claim', undefined],
  ['AwaitingVerification', 'unclaim', undefined],
  ['AwaitingVerification', 'complete', undefined],
  ['AwaitingVerification', 'reject', undefined],
  ['Pending', 'verify', undefined],
  ['Pending', 'cancel', { to: 'Cancelled', ledger: 'release', event: 'payout.cancelled', reason: 'user' }],
  ['Pending', 'exhaust_attempts', undefined],
  ['Pending', 'expire_code', undefined],
  ['Pending', 'claim', { to: 'Sending', ledger: 'none', event: null }],
  ['Pending', 'unclaim', undefined],
  ['Pending', 'complete', undefined],
  ['Pending', 'reject', { to: 'Rejected', ledger: 'release', event: 'payout.rejected' }],
  // Claimed: the coins may be on their way. Never cancelled by the merchant (paid twice otherwise).
  ['Sending', 'verify', undefined],
  ['Sending', 'cancel', undefined],
  ['Sending', 'exhaust_attempts', undefined],
  ['Sending', 'expire_code', undefined],
  ['Sending', 'claim', undefined],
  // Nothing was ever signed for it (a UTXO batch the signer refused): it may be claimed again.
  ['Sending', 'unclaim', { to: 'Pending', ledger: 'none', event: null }],
  ['Sending', 'complete', { to: 'Completed', ledger: 'debit', event: 'payout.completed' }],
  ['Sending', 'reject', { to: 'Rejected', ledger: 'release', event: 'payout.rejected' }],
  ...(['Completed', 'Rejected', 'Cancelled'] as const).flatMap((from) => PAYOUT_TRIGGERS.map((trigger): Cell => [from, trigger, undefined])),
];

test('the table covers every stage × trigger pair exactly once', () => {
  expect(EXPECTED).toHaveLength(PAYOUT_STAGES.length * PAYOUT_TRIGGERS.length);
  expect(new Set(EXPECTED.map(([from, trigger]) => `${from}/${trigger}`)).size).toBe(EXPECTED.length);
  expect(Object.keys(TRANSITIONS).sort()).toEqual([...PAYOUT_STAGES].sort());
});

/** Refusals whose code says more than the trigger's usual one. */
const STAGE_REFUSAL: Record<string, string> = {
  'Sending/cancel': 'payout_in_flight',
  'Pending/complete': 'payout_not_claimed',
  'Sending/claim': 'payout_already_claimed',
  'Pending/unclaim': 'payout_not_claimed',
};

test.each(EXPECTED)('%s --%s--> %j', (from, trigger, expected) => {
  expect(transition(from, trigger)).toEqual(expected);
  const decision = decide(from, trigger);
  if (expected) expect(decision).toEqual({ ok: true, transition: expected });
  else if (STAGE_REFUSAL[`${from}/${trigger}`]) expect(decision).toMatchObject({ ok: false, code: STAGE_REFUSAL[`${from}/${trigger}`] });
  else expect(decision).toMatchObject({ ok: false, code: REFUSAL_CODE[trigger], reason: expect.stringContaining(`payout is ${statusOfStage(from)}`) });
});

test('source and target stages the SQL guards use', () => {
  expect(sourceStages('verify')).toEqual(['AwaitingVerification']);
  expect(sourceStages('cancel')).toEqual(['AwaitingVerification', 'Pending']);
  expect(sourceStages('claim')).toEqual(['Pending']);
  expect(sourceStages('unclaim')).toEqual(['Sending']);
  expect(sourceStages('complete')).toEqual(['Sending']);
  expect(sourceStages('reject')).toEqual(['Pending', 'Sending']);
  expect(sourceStages('expire_code')).toEqual(['AwaitingVerification']);
  expect(Object.fromEntries(PAYOUT_TRIGGERS.map((t) => [t, targetStage(t)]))).toEqual({
    verify: 'Pending',
    cancel: 'Cancelled',
    exhaust_attempts: 'Cancelled',
    expire_code: 'Cancelled',
    claim: 'Sending',
    unclaim: 'Pending',
    complete: 'Completed',
    reject: 'Rejected',
  });
  // A claimed Pending payout is stage Sending, shown as Pending.
  expect(stageOf({ status: 'Pending', claimed_at: new Date() })).toBe('Sending');
  expect(stageOf({ status: 'Pending', claimed_at: null })).toBe('Pending');
  expect(stageOf({ status: 'Completed', claimed_at: new Date() })).toBe('Completed');
  expect(statusOfStage('Sending')).toBe('Pending');
  // Terminal states have no way out; nothing leads back to AwaitingVerification (creation only).
  for (const terminal of ['Completed', 'Rejected', 'Cancelled'] as const) expect(TRANSITIONS[terminal]).toEqual({});
  expect(CREATION).toEqual({ to: 'AwaitingVerification', ledger: 'hold', events: ['payout.requested'] });
});

test('409 codes and reasons of refused triggers', () => {
  expect(decide('Completed', 'cancel')).toEqual({
    ok: false,
    code: 'payout_not_cancellable',
    reason: 'payout is Completed; only a payout in AwaitingVerification or Pending can be cancelled',
  });
  expect(decide('Pending', 'verify')).toMatchObject({ code: 'payout_not_verifiable' });
  expect(decide('Cancelled', 'complete')).toMatchObject({ code: 'payout_not_pending' });
  expect(decide('AwaitingVerification', 'reject')).toMatchObject({ code: 'payout_not_pending' });
  expect(decide('Sending', 'cancel')).toMatchObject({ code: 'payout_in_flight', reason: expect.stringContaining('can no longer be cancelled') });
  expect(decide('Pending', 'complete')).toMatchObject({ code: 'payout_not_claimed' });
  expect(decide('Sending', 'claim')).toMatchObject({ code: 'payout_already_claimed' });
});

// ------------------------------------------------------------------------------------------------
// state → event → webhook

const projectId = randomUUID();
const payoutId = randomUUID();
const at = new Date('2026-03-01T10:00:00.000Z');

function row(status: PayoutStatusName, extra: Partial<PayoutRow> = {}): PayoutRow {
  return {
    id: payoutId,
    project_id: projectId,
    environment: 'sandbox',
    amount: '0.01500000',
    currency: 'BTC',
    network: 'bitcoin',
    address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx',
    note: null,
    status,
    transaction_hash: null,
    admin_note: null,
    cancel_reason: null,
    code_hash: null,
    code_salt: null,
    code_expires_at: new Date(at.getTime() + 15 * 60_000),
    code_attempts_left: 5,
    created_at: at,
    updated_at: at,
    verified_at: status === 'AwaitingVerification' ? null : at,
    completed_at: null,
    rejected_at: null,
    cancelled_at: null,
    claimed_at: null,
    claimed_by: null,
    origin: 'merchant',
    approved_at: null,
    approved_by: null,
    confirmations: null,
    signer_refusal: null,
    signer_refused_at: null,
    ...extra,
  };
}

/** The row a transition leaves behind, as the store writes it. */
function reached(t: Transition): PayoutRow {
  switch (t.to) {
    case 'Pending':
      return row('Pending');
    case 'Sending':
      return row('Pending', { claimed_at: at, claimed_by: 'operator' });
    case 'Completed':
      return row('Completed', { transaction_hash: 'ab'.repeat(32), completed_at: at });
    case 'Rejected':
      return row('Rejected', { admin_note: 'KYC failed', rejected_at: at });
    case 'Cancelled':
      return row('Cancelled', { cancel_reason: t.reason ?? null, cancelled_at: at });
    default:
      throw new Error(`no transition reaches ${t.to}`);
  }
}

/** When the event was written (the relay's event-time header): every body ends with it. */
const occurredAt = new Date('2026-03-04T05:06:07.890Z');
const base = { payoutId, amount: 0.015, currency: 'BTC', environment: 'sandbox', network: 'bitcoin', occurredAt: occurredAt.toISOString() };
const WEBHOOK_OF: Record<string, Record<string, unknown>> = {
  'payout.verified': { ...base, status: 'Pending', origin: 'merchant' },
  'payout.completed': { ...base, status: 'Completed', transactionHash: 'ab'.repeat(32) },
  'payout.rejected': { ...base, status: 'Rejected', adminNote: 'KYC failed' },
};

FormatRegistry.Set('uuid', (v) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v));
FormatRegistry.Set('date-time', (v) => !Number.isNaN(Date.parse(v)) && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(v));

/** The body matches the schema the OpenAPI document publishes for its event type. */
function expectDocumented(eventType: string, body: unknown): void {
  const documented = WEBHOOK_EVENTS[eventType];
  expect(documented).toBeDefined();
  expect([...Value.Errors(documented!.body, body)].map((e) => `${e.path} ${e.message}`)).toEqual([]);
}

const transitions = EXPECTED.flatMap(([from, trigger, t]) => (t && t.event !== null ? [[from, trigger, t] as const] : []));

test('a claim and its release emit no event (no webhook); building one from a claimed row is refused', () => {
  expect(EXPECTED.filter(([, , t]) => t && t.event === null).map(([from, trigger]) => `${from}/${trigger}`)).toEqual(['Pending/claim', 'Sending/unclaim']);
  expect(() => transitionEvent(row('Pending', { claimed_at: at, claimed_by: 'operator' }))).toThrow(/claim emits no event/);
});

test.each(transitions)('%s --%s--> event → webhook', (_from, _trigger, t) => {
  const event = transitionEvent(reached(t));
  expect(event.type).toBe(t.event);
  expect(event.key).toBe(payoutId);
  const webhook = webhookForEventJson(event.type, event.payload, occurredAt);
  expect(webhook).toMatchObject({ kind: 'webhook', projectId });
  if (webhook.kind !== 'webhook') return;
  const expected = t.event === 'payout.cancelled' ? { ...base, status: 'Cancelled', reason: t.reason } : WEBHOOK_OF[t.event as keyof typeof WEBHOOK_OF];
  expect(JSON.parse(webhook.body)).toEqual(expected);
  expect(Object.keys(JSON.parse(webhook.body))[0]).toBe('payoutId');
  expectDocumented(event.type, JSON.parse(webhook.body));
});

test('creation: payout.requested is a webhook (the code is emailed by RPC, no event carries it)', () => {
  const created = row('AwaitingVerification', { note: 'June' });
  const requested = payoutRequestedEvent(created);
  const webhook = webhookForEventJson(requested.type, requested.payload, occurredAt);
  expect(webhook.kind === 'webhook' && JSON.parse(webhook.body)).toEqual({ ...base, status: 'AwaitingVerification' });
  if (webhook.kind === 'webhook') expectDocumented(requested.type, JSON.parse(webhook.body));
  expect(JSON.stringify(requested.payload)).not.toMatch(/code|email/);
});

test('an event is only built from a row in the state it reports', () => {
  expect(() => transitionEvent(row('AwaitingVerification'))).toThrow(/creation only/);
  expect(() => payoutRequestedEvent(row('Pending'))).toThrow(/not AwaitingVerification/);
});
