/**
 * The signer's tables (schema `signer`, migrations in ./migrations) and its one read of the payout
 * service's: payout.payouts, which the signer's database role may only SELECT.
 */
import type { Queryable, TransactionSql } from '@coinvoice/runtime';
import { checkPayoutSignable, type PayoutRow } from './policy';
import type { AutoMaxima } from './settings';
import type { SignerAsset } from './settings';
import type { UtxoTreasuryCoin } from '../domain/fee-rate';

/**
 * The payout a request names, refused unless it may be signed (checkPayoutSignable): what every
 * signer (Ethereum, Tron, Bitcoin/Litecoin) reads of payout.payouts.
 */
export async function findSignablePayout(sql: Queryable, payoutId: string, autoMax: AutoMaxima): Promise<{ found: PayoutRow | undefined; check(): PayoutRow }> {
  const found = await findPayout(sql, payoutId);
  return { found, check: () => checkPayoutSignable(found, payoutId, autoMax) };
}

export async function findPayout(sql: Queryable, payoutId: string): Promise<PayoutRow | undefined> {
  const [row] = await sql<PayoutRow[]>`
    select id::text, environment, status, currency, network, amount::text as amount, address,
           verified_at is not null as verified, approved_at is not null as approved, completed_at is not null as completed
    from payout.payouts where id = ${payoutId}`;
  return row;
}

/**
 * Today's (UTC) signed total of `asset`, its row locked until the transaction ends: every payout
 * signature of the asset passes here, so two concurrent requests cannot both fit under the limit.
 */
export async function lockDailyTotal(tx: TransactionSql, asset: SignerAsset | UtxoTreasuryCoin | 'TRX'): Promise<{ day: string; amount: bigint }> {
  await tx`insert into daily_totals (asset, day) values (${asset}, (now() at time zone 'utc')::date) on conflict do nothing`;
  const [row] = await tx<{ day: string; amount: string }[]>`
    select day::text, amount::text from daily_totals
    where asset = ${asset} and day = (now() at time zone 'utc')::date for update`;
  if (!row) throw new Error('the daily total row vanished');
  return { day: row.day, amount: BigInt(row.amount) };
}

export async function addToDailyTotal(tx: TransactionSql, asset: SignerAsset | UtxoTreasuryCoin | 'TRX', day: string, amount: bigint): Promise<void> {
  await tx`update daily_totals set amount = amount + ${amount.toString()}::numeric where asset = ${asset} and day = ${day}::date`;
}

/** Today's (UTC) fee and gas top-up totals, all purposes (signer.daily_fees). */
export interface DailyFees {
  day: string;
  feeWei: bigint;
  gasTopUpWei: bigint;
}

/**
 * Today's (UTC) fee row, locked until the transaction ends: every signature of every purpose
 * passes here, so two concurrent requests cannot both fit under the fee budget or the top-up limit.
 * A payout takes its asset's daily_totals row first (lockDailyTotal), then this one; nothing takes
 * them the other way round, so the two locks cannot deadlock.
 */
export async function lockDailyFees(tx: TransactionSql): Promise<DailyFees> {
  await tx`insert into daily_fees (day) values ((now() at time zone 'utc')::date) on conflict do nothing`;
  const [row] = await tx<{ day: string; feeWei: string; gasTopUpWei: string }[]>`
    select day::text, fee_wei::text as "feeWei", gas_top_up_wei::text as "gasTopUpWei" from daily_fees
    where day = (now() at time zone 'utc')::date for update`;
  if (!row) throw new Error('the daily fee row vanished');
  return { day: row.day, feeWei: BigInt(row.feeWei), gasTopUpWei: BigInt(row.gasTopUpWei) };
}

export async function addToDailyFees(tx: TransactionSql, day: string, added: { feeWei: bigint; gasTopUpWei: bigint }): Promise<void> {
  await tx`
    update daily_fees set fee_wei = fee_wei + ${added.feeWei.toString()}::numeric,
                          gas_top_up_wei = gas_top_up_wei + ${added.gasTopUpWei.toString()}::numeric
    where day = ${day}::date`;
}

export interface PayoutSignature {
  chainId: number;
  nonce: number;
  to: string;
  value: bigint;
  data: string;
  /** The highest gas_limit × max_fee_per_gas the payout was signed with (its fee budget charge). */
  maxFeeWei: bigint;
}

export async function findPayoutSignature(tx: TransactionSql, payoutId: string): Promise<PayoutSignature | undefined> {
  const [row] = await tx<{ chainId: string; nonce: string; to: string; value: string; data: string; maxFeeWei: string }[]>`
    select chain_id::text as "chainId", nonce::text, to_address as "to", value::text, data, max_fee_wei::text as "maxFeeWei"
    from payout_signatures where payout_id = ${payoutId} for update`;
  return row && { chainId: Number(row.chainId), nonce: Number(row.nonce), to: row.to, value: BigInt(row.value), data: row.data, maxFeeWei: BigInt(row.maxFeeWei) };
}

export async function recordPayoutSignature(
  tx: TransactionSql,
  signature: PayoutSignature & { payoutId: string; asset: SignerAsset; amount: bigint; transactionHash: string },
): Promise<void> {
  await tx`
    insert into payout_signatures (payout_id, asset, amount, chain_id, nonce, to_address, value, data, transaction_hash, max_fee_wei)
    values (${signature.payoutId}, ${signature.asset}, ${signature.amount.toString()}::numeric, ${signature.chainId},
            ${signature.nonce}, ${signature.to}, ${signature.value.toString()}::numeric, ${signature.data}, ${signature.transactionHash},
            ${signature.maxFeeWei.toString()}::numeric)
    on conflict (payout_id) do update
      set transaction_hash = excluded.transaction_hash, signatures = payout_signatures.signatures + 1, last_signed_at = now(),
          max_fee_wei = greatest(payout_signatures.max_fee_wei, excluded.max_fee_wei)`;
}

/** One row of signer.audit_log (null where the request did not say, or was refused before). */
export interface AuditEntry {
  outcome: 'signed' | 'refused';
  caller: string;
  network: string | null;
  purpose: 'payout' | 'sweep' | 'gas_top_up' | null;
  payoutId: string | null;
  addressIndex: number | null;
  asset: string | null;
  fromAddress: string | null;
  toAddress: string | null;
  recipient: string | null;
  amount: bigint | null;
  chainId: number | null;
  nonce: number | null;
  gasLimit: bigint | null;
  maxFeePerGas: bigint | null;
  transactionHash: string | null;
  rule: string | null;
  reason: string | null;
}

const text = (value: bigint | number | null) => (value === null ? null : value.toString());

export async function appendAudit(sql: Queryable, entry: AuditEntry): Promise<void> {
  await sql`
    insert into audit_log (outcome, caller, network, purpose, payout_id, address_index, asset, from_address, to_address,
                           recipient, amount, chain_id, nonce, gas_limit, max_fee_per_gas, transaction_hash, rule, reason)
    values (${entry.outcome}, ${entry.caller}, ${entry.network}, ${entry.purpose}, ${entry.payoutId}, ${entry.addressIndex},
            ${entry.asset}, ${entry.fromAddress}, ${entry.toAddress}, ${entry.recipient}, ${text(entry.amount)}::numeric,
            ${text(entry.chainId)}::numeric, ${text(entry.nonce)}::numeric, ${text(entry.gasLimit)}::numeric,
            ${text(entry.maxFeePerGas)}::numeric, ${entry.transactionHash}, ${entry.rule}, ${entry.reason})`;
}
