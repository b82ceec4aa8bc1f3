/**
 * The watcher's mempool step for UTXO chains (adapters with `pendingTransfers` and
 * `transactionState`): unmined payments to watched addresses are recorded as `seen` with no block
 * (0 confirmations: the invoice shows Confirming), and a payment whose transaction left the mempool
 * unmined while another transaction spent its inputs becomes `replaced` (its invoice moves back,
 * with invoice.reopened). Account chains skip it.
 */
import { eventTransaction, type Logger, type Sql } from '@coinvoice/runtime';
import { settleInvoice } from '../settlement';
import { upsertPayment } from '../store/payments';
import { markReplaced, unminedPayments } from '../store/unmined-payments';
import type { ChainAdapter } from '@coinvoice/chains/chain-adapter';
import type { WatchedSet } from './watched-set';

export async function followMempool(options: {
  sql: Sql;
  adapter: ChainAdapter;
  addresses: WatchedSet;
  logger: Logger;
}): Promise<Awaited<ReturnType<typeof settleInvoice>>[]> {
  const { sql, adapter, addresses, logger } = options;
  if (!adapter.pendingTransfers || !adapter.transactionState) return [];
  // Reads first (no transaction open while the node answers).
  const pending = await adapter.pendingTransfers(addresses);
  const pendingHashes = new Set(pending.map((t) => t.transactionHash));
  const states = new Map<string, Awaited<ReturnType<NonNullable<ChainAdapter['transactionState']>>>>();
  for (const row of await unminedPayments(sql, adapter.chain)) {
    if (pendingHashes.has(row.transaction_hash) || states.has(row.transaction_hash)) continue;
    states.set(row.transaction_hash, await adapter.transactionState(row.transaction_hash));
  }
  return eventTransaction(sql, async (tx) => {
    const touched = new Set<string>();
    for (const transfer of pending) {
      const invoiceId = addresses.invoiceOf(transfer.address);
      if (!invoiceId) continue;
      const [existing] = await tx<{ block_number: string | null; status: string }[]>`
        select block_number, status from payments
        where chain = ${adapter.chain} and transaction_hash = ${transfer.transactionHash} and output_index = ${transfer.outputIndex}`;
      // Already recorded as unmined: nothing new. Recorded in a block that is still ours: the
      // block scan owns it (the mempool answer raced the block).
      if (existing && (existing.block_number === null ? existing.status === 'seen' : existing.status !== 'orphaned')) continue;
      await upsertPayment(tx, adapter.chain, invoiceId, transfer);
      touched.add(invoiceId);
    }
    for (const [transactionHash, state] of states) {
      if (state !== 'replaced') continue;
      const replaced = await markReplaced(tx, adapter.chain, transactionHash);
      if (replaced.length > 0) logger.warn({ transactionHash }, 'payment replaced: its transaction left the mempool and its inputs were spent elsewhere');
      for (const row of replaced) touched.add(row.invoice_id);
    }
    const outcomes = [];
    for (const invoiceId of touched) outcomes.push(await settleInvoice(tx, invoiceId));
    return outcomes;
  });
}
