/** The signer's UTXO tables (migrations/0010_utxo.sql) and its UTXO audit rows. */
import type { Queryable, TransactionSql } from '@coinvoice/runtime';
import type { UtxoTreasuryCoin } from '../domain/fee-rate';

/** The input set and highest fee a payout is bound to. */
export interface UtxoPayoutSignature {
  payoutId: string;
  /** Sorted "txid:vout". */
  inputs: string[];
  fee: bigint;
  txid: string;
}

/** The earlier signatures of `payoutIds`, their rows locked until the transaction ends. */
export async function findUtxoPayoutSignatures(tx: TransactionSql, payoutIds: readonly string[]): Promise<UtxoPayoutSignature[]> {
  const rows = await tx<{ payoutId: string; inputs: string[]; fee: string; txid: string }[]>`
    select payout_id::text as "payoutId", inputs, fee::text, txid from utxo_payout_signatures
    where payout_id = any(${payoutIds as string[]}::uuid[]) order by payout_id for update`;
  return rows.map((r) => ({ payoutId: r.payoutId, inputs: r.inputs, fee: BigInt(r.fee), txid: r.txid }));
}

export async function recordUtxoPayoutSignature(
  tx: TransactionSql,
  s: { payoutId: string; network: string; coin: UtxoTreasuryCoin; amount: bigint; inputs: string[]; inputAmounts: bigint[]; fee: bigint; txid: string },
): Promise<void> {
  // The input amounts of the first signature stay (boundInputAmounts): every later one was checked against them.
  await tx`
    insert into utxo_payout_signatures (payout_id, network, coin, amount, inputs, input_amounts, fee, txid)
    values (${s.payoutId}, ${s.network}, ${s.coin}, ${s.amount.toString()}::numeric, ${s.inputs}::text[],
            ${s.inputAmounts.map((a) => a.toString())}::numeric[], ${s.fee.toString()}::numeric, ${s.txid})
    on conflict (payout_id) do update
      set txid = excluded.txid, signatures = utxo_payout_signatures.signatures + 1, last_signed_at = now(),
          input_amounts = coalesce(utxo_payout_signatures.input_amounts, excluded.input_amounts),
          fee = greatest(utxo_payout_signatures.fee, excluded.fee)`;
}

/**
 * The amount each of `outpoints` was said to hold at the first signature naming it, whichever
 * payout that was (rows signed before amounts were kept say nothing). Read under the coin's daily-row
 * lock, so two first requests naming one outpoint see each other.
 */
export async function boundInputAmounts(tx: TransactionSql, outpoints: readonly string[]): Promise<Map<string, { amount: bigint; payoutId: string }>> {
  const rows = await tx<{ payoutId: string; inputs: string[]; inputAmounts: string[] }[]>`
    select payout_id::text as "payoutId", inputs, input_amounts::text[] as "inputAmounts" from utxo_payout_signatures
    where inputs && ${outpoints as string[]}::text[] and input_amounts is not null
    order by first_signed_at, payout_id`;
  const bound = new Map<string, { amount: bigint; payoutId: string }>();
  const wanted = new Set(outpoints);
  for (const row of rows) {
    row.inputs.forEach((outpoint, i) => {
      if (wanted.has(outpoint) && !bound.has(outpoint)) bound.set(outpoint, { amount: BigInt(row.inputAmounts[i]!), payoutId: row.payoutId });
    });
  }
  return bound;
}

/** Today's (UTC) fee row of `coin`, locked until the transaction ends. */
export async function lockUtxoDailyFees(tx: TransactionSql, coin: UtxoTreasuryCoin): Promise<{ day: string; fee: bigint }> {
  await tx`insert into utxo_daily_fees (coin, day) values (${coin}, (now() at time zone 'utc')::date) on conflict do nothing`;
  const [row] = await tx<{ day: string; fee: string }[]>`
    select day::text, fee::text from utxo_daily_fees where coin = ${coin} and day = (now() at time zone 'utc')::date for update`;
  if (!row) throw new Error('the UTXO daily fee row vanished');
  return { day: row.day, fee: BigInt(row.fee) };
}

export async function addToUtxoDailyFees(tx: TransactionSql, coin: UtxoTreasuryCoin, day: string, fee: bigint): Promise<void> {
  await tx`update utxo_daily_fees set fee = fee + ${fee.toString()}::numeric where coin = ${coin} and day = ${day}::date`;
}

/** One signer.audit_log row of SignUtxoTransaction. */
export interface UtxoAuditEntry {
  outcome: 'signed' | 'refused';
  caller: string;
  network: string;
  payoutIds: string[];
  asset: string | null;
  /** The listed payouts' total, base units. */
  amount: bigint | null;
  fee: bigint | null;
  inputs: string[] | null;
  txid: string | null;
  rule: string | null;
  reason: string | null;
}

const text = (value: bigint | null) => (value === null ? null : value.toString());

export async function appendUtxoAudit(sql: Queryable, e: UtxoAuditEntry): Promise<void> {
  await sql`
    insert into audit_log (outcome, caller, network, purpose, payout_id, asset, amount, fee, inputs, payout_ids, txid, transaction_hash, rule, reason)
    values (${e.outcome}, ${e.caller}, ${e.network}, 'payout', ${e.payoutIds.length === 1 ? e.payoutIds[0]! : null}, ${e.asset},
            ${text(e.amount)}::numeric, ${text(e.fee)}::numeric, ${e.inputs}::text[], ${e.payoutIds}::uuid[], ${e.txid},
            ${e.outcome === 'signed' ? e.txid : null}, ${e.rule}, ${e.reason})`;
}
