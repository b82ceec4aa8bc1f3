/** Payments not (or no longer) in a block on UTXO chains: what the watcher's mempool step follows. */
import type { Queryable, TransactionSql } from '@coinvoice/runtime';
import type { ChainName } from '@coinvoice/chains/chain-adapter';
import type { PaymentRow } from './payments';

/**
 * Payments seen in the mempool and not mined yet, and payments orphaned by a reorg (their
 * transaction may be back in the mempool, mined again, or double-spent).
 */
export async function unminedPayments(sql: Queryable, chain: ChainName): Promise<PaymentRow[]> {
  return sql<PaymentRow[]>`
    select * from payments
    where chain = ${chain} and ((status = 'seen' and block_number is null) or status = 'orphaned')
    order by id`;
}

/** Marks the payments of a replaced (double-spent) transaction; returns the rows changed. */
export async function markReplaced(tx: TransactionSql, chain: ChainName, transactionHash: string): Promise<PaymentRow[]> {
  return tx<PaymentRow[]>`
    update payments set status = 'replaced', confirmations = 0, block_number = null, block_hash = null, block_time = null, updated_at = now()
    where chain = ${chain} and transaction_hash = ${transactionHash} and status in ('seen', 'orphaned')
    returning *`;
}
