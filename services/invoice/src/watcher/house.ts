/**
 * What the house (the treasury's sweep gas, watcher.ts fromHouse) sent to watched addresses, kept
 * per block so balance reconciliation can tell it from a payment the block scan missed: the house's
 * money is never credited to a merchant. Rows above a reorg's fork point leave with their blocks.
 */
import type { ObservedTransfer } from '@coinvoice/chains/chain-adapter';
import type { CryptoCode } from '@coinvoice/chains/coin';
import type { Queryable } from '@coinvoice/runtime';

export async function recordHouseTransfer(sql: Queryable, chain: string, transfer: ObservedTransfer): Promise<void> {
  if (!transfer.block) return; // the block scan's transfers are mined; an unmined one is no balance yet
  await sql`
    insert into house_transfers (chain, transaction_hash, output_index, address, asset, amount, block_number)
    values (${chain}, ${transfer.transactionHash}, ${transfer.outputIndex}, ${transfer.address}, ${transfer.asset}, ${transfer.amount.toFixed()}, ${transfer.block.height})
    on conflict do nothing`;
}

export async function deleteHouseTransfersAbove(sql: Queryable, chain: string, height: number): Promise<void> {
  await sql`delete from house_transfers where chain = ${chain} and block_number > ${height}`;
}

/** Per lower-case address: what the house sent it of `asset` up to `height` (inclusive). */
export async function houseTotals(sql: Queryable, chain: string, asset: CryptoCode, addresses: readonly string[], height: number): Promise<Map<string, string>> {
  const rows = await sql<{ address: string; total: string }[]>`
    select lower(address) as address, sum(amount)::text as total from house_transfers
    where chain = ${chain} and asset = ${asset} and lower(address) = any(${addresses.map((a) => a.toLowerCase())}::text[]) and block_number <= ${height}
    group by lower(address)`;
  return new Map(rows.map((r) => [r.address, r.total]));
}
