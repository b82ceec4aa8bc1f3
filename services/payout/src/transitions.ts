/**
 * Carries out one row of the transition table on a LOCKED payout, inside the caller's transaction:
 * the status change (guarded in SQL), the ledger effect the table names (release or debit of the
 * hold), and the event the table names, all committing together or not at all.
 */
import { enqueueEvent, errors, type EventTransaction } from '@coinvoice/runtime';
import { decide, REFUSAL_CODE, stageOf, type PayoutTrigger } from './domain/status';
import { transitionEvent } from './events/payout-events';
import { debit, release, type BalanceKey } from './store/ledger';
import { applyTransition, type PayoutRow, type TransitionFields } from './store/payouts';

export function balanceKeyOf(payout: PayoutRow): BalanceKey {
  return { projectId: payout.project_id, environment: payout.environment, currency: payout.currency, network: payout.network };
}

/**
 * Applies `trigger` to `payout` (locked by the caller). Throws the trigger's 409 (e.g.
 * payout_not_cancellable) when the table refuses it from the payout's status.
 */
export async function applyTrigger(
  tx: EventTransaction,
  payout: PayoutRow,
  trigger: PayoutTrigger,
  fields: TransitionFields = {},
): Promise<PayoutRow> {
  const decision = decide(stageOf(payout), trigger);
  if (!decision.ok) throw errors.conflict(decision.code, decision.reason);
  const { transition } = decision;
  const row = await applyTransition(tx, payout.id, trigger, { ...fields, cancelReason: transition.reason });
  // The lock and the decision above make this unreachable; the SQL guard keeps it impossible.
  if (!row) throw errors.conflict(REFUSAL_CODE[trigger], 'the payout changed during the request');
  if (stageOf(row) !== transition.to) throw new Error(`payout ${row.id} reached ${stageOf(row)}, the table says ${transition.to}`);
  if (transition.ledger === 'release') await release(tx, balanceKeyOf(row), row.id, row.amount);
  else if (transition.ledger === 'debit') await debit(tx, balanceKeyOf(row), row.id, row.amount);
  if (transition.event === null) return row;
  const event = transitionEvent(row);
  if (event.type !== transition.event) throw new Error(`payout ${row.id}: ${event.type} built, the table says ${transition.event}`);
  await enqueueEvent(tx, event);
  return row;
}
