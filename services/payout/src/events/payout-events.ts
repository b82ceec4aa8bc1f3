/**
 * The events the payout service publishes (events.proto), built from a payout row and written to
 * the outbox with `enqueueEvent` in the transaction of the change. Payloads are the protobuf
 * messages as JSON (`toJson`): flat, public spellings, amounts as decimal strings, keyed by the
 * payout id. Which transition emits which event is the domain's table (src/domain/status.ts).
 *
 * No event carries the verification code: it leaves the service only in the notifier call that
 * emails it (NotifierService.SendPayoutVerificationEmail).
 */
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { NewEvent } from '@coinvoice/runtime';
import {
  PayoutCancelledSchema,
  PayoutCompletedSchema,
  PayoutRejectedSchema,
  PayoutRequestedSchema,
  PayoutVerifiedSchema,
} from '@coinvoice/runtime/gen/coinvoice/payout/v1/events_pb';
import { formatPlain } from '@coinvoice/domain/money';
import type { PayoutEventType } from '../domain/status';
import type { PayoutRow } from '../store/payouts';

function base(row: PayoutRow) {
  return {
    payoutId: row.id,
    projectId: row.project_id,
    environment: row.environment,
    amount: formatPlain(row.amount),
    currency: row.currency,
    network: row.network,
    status: row.status,
  };
}

function event(type: PayoutEventType, row: PayoutRow, payload: NewEvent['payload']): NewEvent {
  return { type, payload, key: row.id };
}

function assertStatus(row: PayoutRow, status: PayoutRow['status']): void {
  if (row.status !== status) throw new Error(`payout ${row.id} is ${row.status}, not ${status}`);
}

export function payoutRequestedEvent(row: PayoutRow): NewEvent {
  assertStatus(row, 'AwaitingVerification');
  const message = create(PayoutRequestedSchema, {
    ...base(row),
    address: row.address,
    ...(row.note === null ? {} : { note: row.note }),
    createdAt: timestampFromDate(row.created_at),
  });
  return event('payout.requested', row, toJson(PayoutRequestedSchema, message));
}

export function payoutVerifiedEvent(row: PayoutRow): NewEvent {
  assertStatus(row, 'Pending');
  if (!row.verified_at) throw new Error(`payout ${row.id} has no verified_at`);
  const message = create(PayoutVerifiedSchema, { ...base(row), verifiedAt: timestampFromDate(row.verified_at), origin: row.origin });
  return event('payout.verified', row, toJson(PayoutVerifiedSchema, message));
}

export function payoutCompletedEvent(row: PayoutRow): NewEvent {
  assertStatus(row, 'Completed');
  if (!row.completed_at || row.transaction_hash === null) throw new Error(`payout ${row.id} is not completed`);
  const message = create(PayoutCompletedSchema, {
    ...base(row),
    transactionHash: row.transaction_hash,
    completedAt: timestampFromDate(row.completed_at),
  });
  return event('payout.completed', row, toJson(PayoutCompletedSchema, message));
}

export function payoutRejectedEvent(row: PayoutRow): NewEvent {
  assertStatus(row, 'Rejected');
  if (!row.rejected_at || row.admin_note === null) throw new Error(`payout ${row.id} is not rejected`);
  const message = create(PayoutRejectedSchema, {
    ...base(row),
    adminNote: row.admin_note,
    rejectedAt: timestampFromDate(row.rejected_at),
  });
  return event('payout.rejected', row, toJson(PayoutRejectedSchema, message));
}

export function payoutCancelledEvent(row: PayoutRow): NewEvent {
  assertStatus(row, 'Cancelled');
  if (!row.cancelled_at || row.cancel_reason === null) throw new Error(`payout ${row.id} is not cancelled`);
  const message = create(PayoutCancelledSchema, {
    ...base(row),
    reason: row.cancel_reason,
    cancelledAt: timestampFromDate(row.cancelled_at),
  });
  return event('payout.cancelled', row, toJson(PayoutCancelledSchema, message));
}

/** The event of a transition out of AwaitingVerification or Pending, by the status it reached (a claim emits none). */
export function transitionEvent(row: PayoutRow): NewEvent {
  switch (row.status) {
    case 'Pending':
      if (row.claimed_at !== null) throw new Error(`payout ${row.id}: a claim emits no event`);
      return payoutVerifiedEvent(row);
    case 'Completed':
      return payoutCompletedEvent(row);
    case 'Rejected':
      return payoutRejectedEvent(row);
    case 'Cancelled':
      return payoutCancelledEvent(row);
    case 'AwaitingVerification':
      throw new Error('AwaitingVerification is reached by creation only');
  }
}
