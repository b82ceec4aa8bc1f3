/**
 * What moved on watched addresses that is not a payment, kept per block so balance reconciliation
 * can tell it from a payment the block scan missed (docs/watcher.md#what-left-an-address):
 * - `house_transfers`: what the house (the treasury's sweep gas, watcher.ts fromHouse) sent to
 *   them — the house's money is never credited to a merchant;
 * - `address_outflows`: what left them (a sweep's value and fee, a token transfer from them) — once
 *   swept, a later payment the scan cannot see was otherwise hidden by the swept amount.
 * Rows above a reorg's fork point leave with their blocks.
 */
import type { ObservedTransfer } from '@coinvoice/chains/chain-adapter';
import type { CryptoCode } from '@coinvoice/chains/coin';
import type { Queryable } from '@coinvoice/runtime';

/** Where a movement is kept: sent by the house to a watched address, or gone out of one. */
export type Movement = 'house_transfers' | 'address_outflows';

export async function recordMovement(sql: Queryable, movement: Movement, chain: string, transfer: ObservedTransfer): Promise<void> {
  if (!transfer.block) return; // the block scan's transfers are mined; an unmined one is no balance yet
  await sql`
    insert into ${sql(movement)} (chain, transaction_hash, output_index, address, asset, amount, block_number)
    values (${chain}, ${transfer.transactionHash}, ${transfer.outputIndex}, ${transfer.address}, ${transfer.asset}, ${transfer.amount.toFixed()}, ${transfer.block.height})
    on conflict do nothing`;
}

export async function deleteMovementsAbove(sql: Queryable, chain: string, height: number): Promise<void> {
  await sql`delete from house_transfers where chain = ${chain} and block_number > ${height}`;
  await sql`delete from address_outflows where chain = ${chain} and block_number > ${height}`;
}

/**
 * Per lower-case address: what the house sent it of `asset` up to `height` (inclusive) less what
 * left it, in one statement.
 */
export async function netMovements(sql: Queryable, chain: string, asset: CryptoCode, addresses: readonly string[], height: number): Promise<Map<string, string>> {
  const lower = addresses.map((a) => a.toLowerCase());
  const rows = await sql<{ address: string; net: string }[]>`
    select address, sum(amount)::text as net from (
      select lower(address) as address, amount from house_transfers
      where chain = ${chain} and asset = ${asset} and lower(address) = any(${lower}::text[]) and block_number <= ${height}
      union all
      select lower(address), -amount from address_outflows
      where chain = ${chain} and asset = ${asset} and lower(address) = any(${lower}::text[]) and block_number <= ${height}
    ) movements
    group by address`;
  return new Map(rows.map((r) => [r.address, r.net]));
}
