/** Business metrics of the payout service, next to the runtime's RPC metrics on /metrics. */
import { Counter, type Registry } from 'prom-client';

export interface PayoutMetrics {
  requested: Counter<'currency' | 'environment'>;
  refusedInsufficient: Counter;
  idempotentReplays: Counter;
  verified: Counter;
  wrongCodes: Counter;
  cancelled: Counter<'reason'>;
  completed: Counter<'currency'>;
  rejected: Counter;
  credited: Counter<'currency' | 'environment'>;
  ledgerInvariantViolations: Counter<'kind'>;
  autoSweeps: Counter<'currency'>;
}

export function createPayoutMetrics(registry: Registry): PayoutMetrics {
  return {
    autoSweeps: new Counter({
      name: 'payout_auto_sweeps_total',
      help: 'Auto-sweep payouts created because a live balance reached its threshold',
      labelNames: ['currency'],
      registers: [registry],
    }),
    ledgerInvariantViolations: new Counter({
      name: 'ledger_invariant_violations_total',
      help: 'Ledger invariant violations found by the check (docs/accounting.md), by kind: balance_mismatch, credit_missing, credit_amount_mismatch, credit_duplicated, credit_unbacked',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    requested: new Counter({
      name: 'payout_requested_total',
      help: 'Payouts requested (amount held), by currency and environment',
      labelNames: ['currency', 'environment'] as const,
      registers: [registry],
    }),
    refusedInsufficient: new Counter({
      name: 'payout_insufficient_balance_total',
      help: 'Payout requests refused because the available balance did not cover them',
      registers: [registry],
    }),
    idempotentReplays: new Counter({
      name: 'payout_idempotent_replays_total',
      help: 'RequestPayout calls answered by replaying an earlier response for the same Idempotency-Key',
      registers: [registry],
    }),
    verified: new Counter({ name: 'payout_verified_total', help: 'Payouts verified with their emailed code', registers: [registry] }),
    wrongCodes: new Counter({ name: 'payout_wrong_codes_total', help: 'Wrong verification codes entered', registers: [registry] }),
    cancelled: new Counter({
      name: 'payout_cancelled_total',
      help: 'Payouts cancelled (hold released), by reason: user, attempts_exhausted, code_expired',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    completed: new Counter({
      name: 'payout_completed_total',
      help: 'Payouts completed by an operator (hold debited), by currency',
      labelNames: ['currency'] as const,
      registers: [registry],
    }),
    rejected: new Counter({ name: 'payout_rejected_total', help: 'Payouts rejected by an operator (hold released)', registers: [registry] }),
    credited: new Counter({
      name: 'payout_ledger_credits_total',
      help: 'invoice.paid events credited to a balance, by currency and environment',
      labelNames: ['currency', 'environment'] as const,
      registers: [registry],
    }),
  };
}
