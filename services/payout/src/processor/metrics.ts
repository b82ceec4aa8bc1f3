/** The processor's metrics (docs/treasury.md#processor), on the role's admin port next to the runtime's. */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface ProcessorMetrics {
  active: Gauge<'network'>;
  treasuryBalance: Gauge<'network' | 'asset'>;
  payoutsInFlight: Gauge<'network'>;
  oldestInFlightSeconds: Gauge<'network'>;
  sweepTasks: Gauge<'network' | 'status'>;
  broadcast: Counter<'network' | 'purpose'>;
  replaced: Counter<'network' | 'purpose'>;
  failed: Counter<'network' | 'purpose'>;
  signerRefusals: Counter<'network' | 'purpose'>;
  roundErrors: Counter<'network'>;
  lastRoundSucceeded: Gauge<'network'>;
  claimableOldestSeconds: Gauge<'network'>;
  itemErrors: Counter<'network' | 'step'>;
  nonceResyncs: Counter<'network' | 'outcome'>;
  feeCapWaiting: Gauge<'network'>;
  treasuryBelowMinimum: Gauge<'network' | 'asset'>;
  payoutsStuck: Gauge<'network'>;
  lostRebroadcasts: Counter<'network'>;
  batchesAbandoned: Counter<'network'>;
}

export function createProcessorMetrics(registry: Registry): ProcessorMetrics {
  return {
    active: new Gauge({ name: 'payout_processor_active', help: '1 while this replica holds the network\'s processor lock (one active per network)', labelNames: ['network'] as const, registers: [registry] }),
    treasuryBalance: new Gauge({
      name: 'treasury_balance_base_units',
      help: 'The treasury address\'s balance per asset, in base units (wei, token units); a gauge, so a float',
      labelNames: ['network', 'asset'] as const,
      registers: [registry],
    }),
    payoutsInFlight: new Gauge({ name: 'payouts_in_flight', help: 'Payouts the processor claimed and signed, not yet completed or rejected', labelNames: ['network'] as const, registers: [registry] }),
    oldestInFlightSeconds: new Gauge({
      name: 'payout_in_flight_oldest_seconds',
      help: 'Age of the oldest payout in flight (since the processor claimed it); 0 when none',
      labelNames: ['network'] as const,
      registers: [registry],
    }),
    sweepTasks: new Gauge({ name: 'sweep_tasks', help: 'Sweep tasks by status', labelNames: ['network', 'status'] as const, registers: [registry] }),
    broadcast: new Counter({ name: 'treasury_transactions_broadcast_total', help: 'Signed transactions the node accepted, by purpose', labelNames: ['network', 'purpose'] as const, registers: [registry] }),
    replaced: new Counter({ name: 'treasury_transactions_replaced_total', help: 'Transactions replaced with a higher fee (same nonce), by purpose', labelNames: ['network', 'purpose'] as const, registers: [registry] }),
    failed: new Counter({ name: 'treasury_transactions_failed_total', help: 'Transactions mined and reverted, by purpose', labelNames: ['network', 'purpose'] as const, registers: [registry] }),
    signerRefusals: new Counter({ name: 'payout_processor_signer_refusals_total', help: 'Requests the signer refused (PermissionDenied), by purpose', labelNames: ['network', 'purpose'] as const, registers: [registry] }),
    roundErrors: new Counter({ name: 'payout_processor_round_errors_total', help: 'Processor rounds that failed (node, signer or database unavailable) and were retried', labelNames: ['network'] as const, registers: [registry] }),
    claimableOldestSeconds: new Gauge({
      name: 'payouts_claimable_oldest_seconds',
      help: 'How long the oldest payout this processor may send by itself has waited since it became claimable (verified, approved or within PAYOUT_AUTO_MAX): high while the treasury cannot cover it',
      labelNames: ['network'] as const,
      registers: [registry],
    }),
    lastRoundSucceeded: new Gauge({
      name: 'payout_processor_last_round_success_timestamp_seconds',
      help: 'Unix time of the active processor\'s last round that ended without error (set when it became active, before its first round): old while rounds fail or hang',
      labelNames: ['network'] as const,
      registers: [registry],
    }),
    itemErrors: new Counter({
      name: 'payout_processor_item_errors_total',
      help: 'One item that failed and was left for later while the round went on with the others: a nonce group (record, replace), a sweep group (sweep), a UTXO batch (record, sign, broadcast); alert on any increase',
      labelNames: ['network', 'step'] as const,
      registers: [registry],
    }),
    nonceResyncs: new Counter({
      name: 'payout_processor_nonce_resyncs_total',
      help: 'A nonce used by a transaction the processor did not make: next_moved (next nonce moved up to the chain\'s), superseded (a signed transaction of ours can never be mined; its payout rejected); or one of ours recorded confirmed that the chain lost in a deep reorg: lost_rebroadcast (its stored bytes sent again); alert on any',
      labelNames: ['network', 'outcome'] as const,
      registers: [registry],
    }),
    feeCapWaiting: new Gauge({
      name: 'payout_processor_fee_cap_waiting',
      help: '1 while the fee is above the processor\'s cap (EVM: the base fee at SIGNER_MAX_FEE_PER_GAS_WEI; Bitcoin, Litecoin: the estimate above PAYOUT_MAX_FEE_RATE_<COIN>): new transfers wait for it to fall',
      labelNames: ['network'] as const,
      registers: [registry],
    }),
    treasuryBelowMinimum: new Gauge({
      name: 'treasury_balance_below_minimum',
      help: '1 while the treasury holds less of the asset than TREASURY_MIN_BALANCE_<ASSET>, else 0',
      labelNames: ['network', 'asset'] as const,
      registers: [registry],
    }),
    lostRebroadcasts: new Counter({
      name: 'payout_processor_lost_rebroadcasts_total',
      help: 'UTXO batch transactions recorded confirmed that a reorg deeper than the confirmation count took off the chain; their stored bytes sent again (docs/treasury.md#deep-reorgs); alert on any',
      labelNames: ['network'] as const,
      registers: [registry],
    }),
    batchesAbandoned: new Counter({
      name: 'payout_processor_batches_abandoned_total',
      help: 'UTXO payout batches none of whose versions can ever be mined (an input spent elsewhere at final depth); their payouts rejected; alert on any',
      labelNames: ['network'] as const,
      registers: [registry],
    }),
    payoutsStuck: new Gauge({
      name: 'payouts_stuck',
      help: 'Payouts in flight longer than PAYOUT_STUCK_AFTER since the processor claimed them',
      labelNames: ['network'] as const,
      registers: [registry],
    }),
  };
}
