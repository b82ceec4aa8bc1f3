/**
 * What left watched addresses (a sweep's value and fee, a token transfer from them), kept per block
 * so balance reconciliation adds it back (docs/watcher.md#what-left-an-address): without it, once a
 * deposit was swept, a later payment the block scan cannot see was hidden by the swept amount.
 * Rows above a reorg's fork point leave with their blocks.
 */
import type { ObservedTransfer } from '@coinvoice/chains/chain-adapter';
import type { CryptoCode } from '@coinvoice/chains/coin';
import type { Queryable } from '@coinvoice/runtime';

export async function recordOutflow(sql: Queryable, chain: string, outflow: ObservedTransfer): Promise<void> {
  if (!outflow.block) return;
  await sql`
    insert into address_outflows (chain, transaction_hash, output_index, address, asset, amount, block_number)
    values (${chain}, ${outflow.transactionHash}, ${outflow.outputIndex}, ${outflow.address}, ${outflow.asset}, ${outflow.amount.toFixed()}, ${outflow.block.height})
    on conflict do nothing`;
}

export async function deleteOutflowsAbove(sql: Queryable, chain: string, height: number): Promise<void> {
  await sql`delete from address_outflows where chain = ${chain} and block_number > ${height}`;
}

/** Per lower-case address: what left it of `asset` up to `height` (inclusive). */
export async function outflowTotals(sql: Queryable, chain: string, asset: CryptoCode, addresses: readonly string[], height: number): Promise<Map<string, string>> {
  const rows = await sql<{ address: string; total: string }[]>`
    select lower(address) as address, sum(amount)::text as total from address_outflows
    where chain = ${chain} and asset = ${asset} and lower(address) = any(${addresses.map((a) => a.toLowerCase())}::text[]) and block_number <= ${height}
    group by lower(address)`;
  return new Map(rows.map((r) => [r.address, r.total]));
}
