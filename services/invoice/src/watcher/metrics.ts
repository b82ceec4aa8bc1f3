/** Metrics of the watcher role (its own /metrics next to the runtime's). */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface WatcherMetrics {
  headLag: Gauge<'chain'>;
  active: Gauge<'chain'>;
  blocks: Counter<'chain'>;
  reorgs: Counter<'chain'>;
  paymentsOrphaned: Counter<'chain'>;
  creditedPaymentsOrphaned: Counter<'chain'>;
  sourceErrors: Counter<'chain' | 'kind'>;
  events: Counter<'chain' | 'event'>;
  reconciliationMismatches: Counter<'chain' | 'asset'>;
}

export function createWatcherMetrics(
  registry: Registry,
  payments?: { chain: string; countPayments: () => Promise<Map<string, number>> },
): WatcherMetrics {
  if (payments) {
    new Gauge({
      name: 'watcher_payments',
      help: 'Payments recorded on the chain, by status (read from the database at scrape time)',
      labelNames: ['chain', 'status'] as const,
      registers: [registry],
      async collect() {
        const counts = await payments.countPayments();
        for (const status of ['seen', 'confirmed', 'final', 'orphaned', 'replaced']) this.set({ chain: payments.chain, status }, counts.get(status) ?? 0);
      },
    });
  }
  return {
    headLag: new Gauge({ name: 'watcher_head_lag_blocks', help: 'Blocks between the chain head and the watcher cursor', labelNames: ['chain'] as const, registers: [registry] }),
    active: new Gauge({ name: 'watcher_active', help: '1 while this replica holds the chain lock (the active watcher)', labelNames: ['chain'] as const, registers: [registry] }),
    blocks: new Counter({ name: 'watcher_blocks_processed_total', help: 'Blocks scanned and committed', labelNames: ['chain'] as const, registers: [registry] }),
    reorgs: new Counter({ name: 'watcher_reorgs_total', help: 'Reorgs detected (cursor block left the canonical chain)', labelNames: ['chain'] as const, registers: [registry] }),
    paymentsOrphaned: new Counter({ name: 'watcher_payments_orphaned_total', help: 'Payments orphaned by reorgs', labelNames: ['chain'] as const, registers: [registry] }),
    creditedPaymentsOrphaned: new Counter({
      name: 'watcher_credited_payments_orphaned_total',
      help: 'INCIDENTS: payments already credited to a balance (invoice.paid or a credited late payment) whose block left the chain; nothing is reversed automatically',
      labelNames: ['chain'] as const,
      registers: [registry],
    }),
    sourceErrors: new Counter({ name: 'watcher_source_errors_total', help: 'Failed watcher rounds by cause (node down, timeout, malformed answer, missing block)', labelNames: ['chain', 'kind'] as const, registers: [registry] }),
    events: new Counter({ name: 'watcher_invoice_events_total', help: 'Invoice events written by settlement, by type', labelNames: ['chain', 'event'] as const, registers: [registry] }),
    reconciliationMismatches: new Counter({ name: 'watcher_reconciliation_mismatches_total', help: 'Addresses whose on-chain balance exceeded their recorded payments', labelNames: ['chain', 'asset'] as const, registers: [registry] }),
  };
}
