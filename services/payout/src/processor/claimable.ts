/**
 * Which payouts a processor may send by itself (docs/treasury.md#processor): live, verified,
 * `Pending`, claimed by nobody, on the processor's network, of one of its assets, and approved by
 * an operator or at most PAYOUT_AUTO_MAX_<ASSET>. One SQL condition for every processor.
 */
import type { Queryable } from '@coinvoice/runtime';

/** The condition on `payouts p` (a fragment of the caller's query). `autoMax`: asset → decimal amount. */
export function claimablePayouts(sql: Queryable, network: string, autoMax: Readonly<Record<string, string>>) {
  const assets = Object.keys(autoMax);
  const maxima = assets.map((asset) => autoMax[asset]!);
  return sql`
    p.status = 'Pending' and p.claimed_at is null and p.environment = 'live' and p.verified_at is not null
    -- This network's payouts only: USDT on bsc is not sent from the Ethereum treasury (docs/treasury.md).
    and p.network = ${network} and p.currency = any(${assets}::text[])
    and (p.approved_at is not null or p.amount <= (${maxima}::numeric[])[array_position(${assets}::text[], p.currency)])`;
}
