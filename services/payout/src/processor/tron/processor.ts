/**
 * The Tron payout processor (`process tron`, docs/treasury.md#tron). One active per network
 * (round-loop.ts). Each round:
 *
 * 1. follow every open transaction (tron_transactions): a mined one counts confirmations in the
 *    canonical chain; at CHAIN_TRON_CONFIRMATIONS the payout completes (payout.completed, the txID
 *    as transactionHash) or, when the call failed on chain (REVERT, OUT_OF_ENERGY), is rejected
 *    with the reason and its hold released. One not mined is broadcast again (its stored bytes)
 *    until its expiration; once a block past its expiration is final and the transaction is in
 *    none, it is `expired` — it can never be mined — and the payout gets a new transaction.
 * 2. pay: payouts whose transaction expired, then claimable ones (approved or ≤ PAYOUT_AUTO_MAX_*):
 *    the node builds the transfer, the processor checks it is exactly the payout's, extends its
 *    expiration (PAYOUT_TRON_LIFETIME) and recomputes the txID, commits it (tron_sign_attempts),
 *    the signer signs, and the row is stored in the transaction that claims the payout — THEN
 *    broadcast. A kill anywhere leaves the attempt (the same bytes are asked again: the same
 *    signature) or a stored row the next round follows; a signature never stored is never broadcast.
 */
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import { eventTransaction, type EventTransaction, type Logger, type Sql } from '@coinvoice/runtime';
import { SignerService } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { Decimal, toBaseUnits } from '@coinvoice/domain/money';
import { decodeRawTransaction, decodeTrc20Transfer, encodeRawTransaction, tronTxid, type TronRawTransaction } from '@coinvoice/chains/tron/transaction';
import { storedMethod } from '../../domain/requests';
import { stageOf } from '../../domain/status';
import { applyTrigger } from '../../transitions';
import { lockPayout, recordPayoutTransaction, type PayoutRow } from '../../store/payouts';
import { claimablePayouts } from '../claimable';
import { LeftAlone } from '../left-alone';
import type { ProcessorMetrics } from '../metrics';
import { describe, refusable, RoundLoop, SignerRefused, signerUnreachable } from '../round-loop';
import { recordSignerRefusal } from '../../store/treasury';
import { isPaused, saveTreasury } from '../store';
import { TronNodeError, type NodeTransaction, type TronNode } from './node';

export const TRON_ASSETS = ['TRX', 'USDT'] as const;
export type TronAsset = (typeof TRON_ASSETS)[number];

/** How often the wait of one payout the treasury cannot cover is logged again. */
const UNCOVERED_LOG_EVERY_MS = 5 * 60_000;
/** How long a payout the signer refused is left alone before it is asked again. */
const REFUSAL_BACKOFF_MS = 5 * 60_000;
/** Payouts sent per round at most. */
const PAYOUTS_PER_ROUND = 50;
/** Payouts looked at per round, oldest first: those the treasury cannot cover never hide the ones after them (docs/treasury.md#payouts-that-cannot-go-yet). */
const PAYOUTS_CONSIDERED_PER_ROUND = 1_000;
/**
 * A built transaction with less time than this left is not asked for again: it might expire before
 * it is stored and broadcast. A new one is built (the signer signs it once the old one expired).
 */
const ATTEMPT_MARGIN_MS = 10_000;
/**
 * What a TRX payout may cost beside its amount: 1 TRX to create an account the chain does not know
 * yet, 0.1 TRX of bandwidth (~268 bytes at 1,000 sun when the free daily bandwidth is spent), with
 * room to spare (docs/treasury.md#tron).
 */
const TRX_TRANSFER_RESERVE_SUN = 1_100_000n;

export interface TronProcessorOptions {
  sql: Sql;
  node: TronNode;
  signer: Client<typeof SignerService>;
  logger: Logger;
  metrics: ProcessorMetrics;
  confirmations: number;
  pollMs: number;
  /** PAYOUT_AUTO_MAX_TRX / _USDT, decimal amounts. */
  autoMax: Readonly<Record<TronAsset, string>>;
  /** CHAIN_TRON_USDT_CONTRACT (base58); empty: USDT payouts on tron are not sent. */
  usdtContract: string;
  /** fee_limit of a TRC-20 transfer (sun): SIGNER_MAX_FEE_LIMIT_SUN (docs/treasury.md#tron). */
  feeLimitSun: bigint;
  /** PAYOUT_TRON_LIFETIME: a transaction's expiration, from when it is built. */
  lifetimeMs: number;
}

interface TronTransactionRow {
  id: string;
  payout_id: string;
  asset: TronAsset;
  amount: string;
  to_address: string;
  txid: string;
  raw_data: Record<string, unknown>;
  raw_data_hex: string;
  expiration_ms: string;
  fee_limit_sun: string;
  signature: string;
  status: 'signed' | 'broadcast' | 'mined' | 'confirmed' | 'failed' | 'expired';
  block_number: string | null;
}

/** The payout's transfer as built: bytes and JSON to sign and broadcast. */
interface BuiltTransfer {
  raw: TronRawTransaction;
  rawDataHex: string;
  rawData: Record<string, unknown>;
  txid: string;
}

export class TronProcessor extends RoundLoop {
  private treasury: string | undefined;
  private readonly refused = new LeftAlone();
  /** Payouts whose wait for the treasury was logged lately. */
  private readonly uncoveredLogged = new LeftAlone();

  constructor(private readonly options: TronProcessorOptions) {
    super({ network: 'tron', sql: options.sql, logger: options.logger, metrics: options.metrics, pollMs: options.pollMs });
  }

  /** The node or the signer unreachable: the round fails (no item is contained on Tron). */
  /** TRX, and USDT once its contract is configured. */
  protected autoMaxima(): Readonly<Record<string, string>> {
    return this.options.usdtContract !== '' ? { TRX: this.options.autoMax.TRX, USDT: this.options.autoMax.USDT } : { TRX: this.options.autoMax.TRX };
  }

  protected isTransportFailure(err: unknown): boolean {
    return err instanceof TronNodeError || signerUnreachable(err);
  }

  private async setUp(): Promise<string> {
    if (this.treasury) return this.treasury;
    const answer = await this.treasuryAnswer(async () => ({ address: (await this.options.signer.getTreasury({ network: 'tron' })).address }));
    if (!/^T[1-9A-HJ-NP-Za-km-z]{33}$/.test(answer.address)) throw new Error('the signer answered a malformed Tron treasury address');
    // Without the signer: this round follows what is in flight; the next asks it again.
    if (!answer.fromSigner) return answer.address;
    await saveTreasury(this.options.sql, 'tron', { address: answer.address });
    this.treasury = answer.address;
    this.logger.info({ treasury: answer.address }, 'treasury address from the signer');
    return answer.address;
  }

  async round(): Promise<void> {
    const treasury = await this.setUp();
    const head = await this.options.node.headBlock();
    const open = await this.options.sql<TronTransactionRow[]>`
      select * from tron_transactions where status in ('signed', 'broadcast', 'mined') order by id`;
    for (const row of open) {
      try {
        await this.follow(row, head.number);
      } catch (err) {
        this.options.metrics.itemErrors.inc({ network: 'tron', step: 'record' });
        this.logger.error({ payoutId: row.payout_id, txid: row.txid, err: describe(err) }, 'following a Tron transaction failed; left for the next round');
      }
    }
    if (!(await isPaused(this.options.sql, 'tron'))) await this.pay(treasury);
    await this.updateGauges(treasury);
  }

  // ---- 1. follow ---------------------------------------------------------------------------

  private async follow(row: TronTransactionRow, head: bigint): Promise<void> {
    const { node, sql, confirmations } = this.options;
    const outcome = await node.outcome(row.txid);
    // Mined, and in the canonical block of that number (a reorged-out block's is no outcome).
    const canonical = outcome.mined && (await node.block(outcome.blockNumber))?.txids.has(row.txid);
    if (!outcome.mined || !canonical) {
      if (row.status === 'mined') {
        await sql`update tron_transactions set status = 'broadcast', block_number = null, updated_at = now() where id = ${row.id}`;
        await sql`update payouts set confirmations = 0, updated_at = now() where id = ${row.payout_id} and status = 'Pending'`;
        this.logger.warn({ txid: row.txid }, 'a mined Tron transaction left the chain (reorg); broadcast again');
      }
      if (BigInt(Date.now()) < BigInt(row.expiration_ms)) {
        await this.broadcast(row);
        return;
      }
      await this.expireIfFinal(row, head);
      return;
    }
    const depth = head - outcome.blockNumber + 1n;
    const final = depth >= BigInt(confirmations);
    await eventTransaction(sql, async (tx) => {
      const status = !final ? 'mined' : outcome.succeeded ? 'confirmed' : 'failed';
      await tx`
        update tron_transactions set status = ${status}, block_number = ${outcome.blockNumber.toString()}, fee_sun = ${outcome.feeSun.toString()},
          failure_reason = ${outcome.reason ?? null}, broadcast_at = coalesce(broadcast_at, now()), updated_at = now()
        where id = ${row.id}`;
      await this.recordPayout(tx, row, Number(depth > 1_000_000n ? 1_000_000n : depth), final, outcome.succeeded, outcome.reason);
    });
    if (final) {
      if (!outcome.succeeded) this.options.metrics.failed.inc({ network: 'tron', purpose: 'payout' });
      this.logger.info({ payoutId: row.payout_id, txid: row.txid, block: outcome.blockNumber.toString(), succeeded: outcome.succeeded, reason: outcome.reason }, outcome.succeeded ? 'Tron payout confirmed' : 'Tron payout failed on chain');
    }
  }

  /**
   * Past its expiration and in no block: once the first block whose timestamp is past the
   * expiration is final, no block that could hold it can change any more (java-tron takes a
   * transaction into a block only before its expiration), so it can never be mined.
   */
  private async expireIfFinal(row: TronTransactionRow, head: bigint): Promise<void> {
    const finalHeight = head - BigInt(this.options.confirmations) + 1n;
    if (finalHeight < 0n) return;
    const finalBlock = await this.options.node.block(finalHeight);
    if (!finalBlock || finalBlock.timestamp <= BigInt(row.expiration_ms)) return;
    // Asked once more after the final block was read: the answer covers every block up to it.
    if ((await this.options.node.outcome(row.txid)).mined) return;
    await this.options.sql`
      update tron_transactions set status = 'expired', failure_reason = 'expired unmined (final block past its expiration)', updated_at = now()
      where id = ${row.id} and status in ('signed', 'broadcast')`;
    this.logger.warn({ payoutId: row.payout_id, txid: row.txid }, 'a Tron transaction expired unmined; the payout is signed anew');
  }

  private async recordPayout(tx: EventTransaction, row: TronTransactionRow, depth: number, final: boolean, succeeded: boolean, reason: string | undefined): Promise<void> {
    const locked = await lockPayout(tx, row.payout_id);
    if (!locked) throw new Error(`tron transaction ${row.id} names payout ${row.payout_id}, which does not exist`);
    const { payout } = locked;
    if (stageOf(payout) !== 'Sending' || payout.claimed_by !== this.processorId) {
      this.logger.warn({ payoutId: row.payout_id, stage: stageOf(payout) }, 'payout no longer held by the processor; its transaction is recorded only');
      return;
    }
    await tx`update payouts set confirmations = ${depth}, transaction_hash = ${row.txid}, updated_at = date_trunc('milliseconds', now()) where id = ${row.payout_id}`;
    if (!final) return;
    const current: PayoutRow = { ...payout, transaction_hash: row.txid };
    if (succeeded) {
      if (!(await recordPayoutTransaction(tx, row.txid, row.payout_id))) throw new Error(`transaction ${row.txid} already completed another payout`);
      await applyTrigger(tx, current, 'complete', { transactionHash: row.txid });
      this.logger.info({ payoutId: row.payout_id, txid: row.txid }, 'payout completed on chain; hold debited');
    } else {
      const adminNote = `the ${payout.currency} transfer failed on chain (transaction ${row.txid}): ${reason ?? 'FAILED'}`;
      await applyTrigger(tx, current, 'reject', { adminNote });
      await tx`update payouts set transaction_hash = ${row.txid}, confirmations = ${depth} where id = ${row.payout_id}`;
      this.logger.warn({ payoutId: row.payout_id, txid: row.txid, reason }, 'payout rejected: its Tron transfer failed on chain; hold released');
    }
  }

  /** The stored bytes to the node; accepted or already known (a duplicate), the row is `broadcast`. */
  private async broadcast(row: TronTransactionRow): Promise<void> {
    const result = await this.options.node.broadcast({ txID: row.txid, raw_data: row.raw_data, raw_data_hex: row.raw_data_hex }, row.signature);
    if (result.accepted || result.code === 'DUP_TRANSACTION_ERROR') {
      await this.options.sql`update tron_transactions set status = 'broadcast', broadcast_at = coalesce(broadcast_at, now()), updated_at = now() where id = ${row.id} and status = 'signed'`;
      if (result.accepted) this.logger.info({ payoutId: row.payout_id, txid: row.txid }, 'Tron transaction broadcast');
      return;
    }
    this.logger.warn({ payoutId: row.payout_id, txid: row.txid, nodeCode: result.code, message: result.message }, 'the node refused a Tron transaction; broadcast again next round until it expires');
  }

  // ---- 2. pay ------------------------------------------------------------------------------

  private async pay(treasury: string): Promise<void> {
    const { sql } = this.options;
    // Attempts of payouts no longer ours to send (cancelled, claimed by an operator) no longer matter.
    await sql`
      delete from tron_sign_attempts a using payouts p
      where p.id = a.payout_id and (p.status <> 'Pending' or (p.claimed_at is not null and p.claimed_by is distinct from ${this.processorId}))`;
    const autoMax = this.autoMaxima();
    // Ours whose transaction expired unmined first (they wait for a new one), then claimable ones.
    const candidates = await sql<(PayoutRow & { ours: boolean })[]>`
      select p.*, (p.claimed_by = ${this.processorId}) as ours from payouts p
      where (p.status = 'Pending' and p.claimed_by = ${this.processorId} and p.currency = any(${Object.keys(autoMax)}::text[])
             and not exists (select 1 from tron_transactions t where t.payout_id = p.id and t.status in ('signed', 'broadcast', 'mined', 'confirmed', 'failed')))
         or (${claimablePayouts(sql, 'tron', autoMax)} and p.id <> all(${this.refused.keys()}::uuid[]))
      order by (p.claimed_by is not null) desc, p.created_at, p.id
      limit ${PAYOUTS_CONSIDERED_PER_ROUND}`;
    if (candidates.length === 0) return;
    const inFlight = await this.inFlight();
    let trx: bigint | undefined;
    let usdt: bigint | undefined;
    let sent = 0;
    for (const { ours, ...payout } of candidates) {
      if (!this.running || sent >= PAYOUTS_PER_ROUND) return;
      if (this.refused.isLeft(payout.id)) continue;
      const asset = payout.currency as TronAsset;
      const amount = toBaseUnits(new Decimal(payout.amount), storedMethod(asset, payout.network).baseUnitDecimals);
      // The treasury covers it beside what is leaving it; a TRC-20 call may burn up to its fee_limit.
      trx ??= await this.options.node.balance(treasury);
      const trxNeeded = inFlight.trx + (asset === 'TRX' ? amount + TRX_TRANSFER_RESERVE_SUN : this.options.feeLimitSun);
      if (asset === 'USDT') usdt ??= await this.options.node.tokenBalance(this.options.usdtContract, treasury);
      if (trx < trxNeeded || (asset === 'USDT' && (usdt ?? 0n) < inFlight.usdt + amount)) {
        // Said once every few minutes per payout; looked at first again next round (it keeps its place).
        if (!this.uncoveredLogged.isLeft(payout.id)) {
          this.uncoveredLogged.leave(payout.id, UNCOVERED_LOG_EVERY_MS);
          this.logger.warn({ payoutId: payout.id, asset, amount: payout.amount }, 'the treasury cannot cover this payout now; it waits (fund the treasury)');
        }
        continue;
      }
      const built = await this.attemptOf(payout.id, treasury, payout.address, asset, amount);
      const row = await refusable(
        eventTransaction(sql, async (tx) => {
          const [locked] = ours
            ? await tx<PayoutRow[]>`select * from payouts where id = ${payout.id} and status = 'Pending' and claimed_by = ${this.processorId} for update skip locked`
            : await tx<PayoutRow[]>`select * from payouts where id = ${payout.id} and status = 'Pending' and claimed_at is null for update skip locked`;
          if (!locked || locked.amount !== payout.amount || locked.address !== payout.address || locked.currency !== payout.currency) return undefined;
          const signature = await this.sign(payout.id, built.rawDataHex, built.txid);
          await tx`delete from tron_sign_attempts where payout_id = ${payout.id}`;
          const claimed = ours ? locked : await applyTrigger(tx, locked, 'claim', { claimedBy: this.processorId });
          await tx`
            update payouts set transaction_hash = ${built.txid}, confirmations = 0, signer_refusal = null, signer_refused_at = null
            where id = ${claimed.id}`;
          const [stored] = await tx<TronTransactionRow[]>`
            insert into tron_transactions (payout_id, asset, amount, to_address, txid, raw_data, raw_data_hex, expiration_ms, fee_limit_sun, signature, status)
            values (${payout.id}, ${asset}, ${amount.toString()}::numeric, ${payout.address}, ${built.txid}, ${tx.json(built.rawData as never)},
                    ${built.rawDataHex}, ${built.raw.expiration.toString()}, ${built.raw.feeLimit.toString()}, ${signature}, 'signed')
            returning *`;
          return stored;
        }),
        (refusal) => recordSignerRefusal(sql, payout.id, refusal),
      );
      if (!row) continue;
      inFlight.trx += asset === 'TRX' ? amount + TRX_TRANSFER_RESERVE_SUN : this.options.feeLimitSun;
      if (asset === 'USDT') inFlight.usdt += amount;
      this.logger.info({ payoutId: payout.id, asset, amount: payout.amount, txid: row.txid, renewed: ours }, ours ? 'payout signed anew (its transaction expired unmined)' : 'payout claimed and signed');
      sent++;
      await this.broadcast(row);
    }
  }

  /** TRX and USDT leaving the treasury in transactions not yet mined (a call at its full fee_limit). */
  private async inFlight(): Promise<{ trx: bigint; usdt: bigint }> {
    const [row] = await this.options.sql<{ trx: string; usdt: string }[]>`
      select coalesce(sum(case when asset = 'TRX' then amount + ${TRX_TRANSFER_RESERVE_SUN.toString()}::numeric else fee_limit_sun end), 0)::text as trx,
             coalesce(sum(case when asset = 'USDT' then amount else 0 end), 0)::text as usdt
      from tron_transactions where status in ('signed', 'broadcast')`;
    return { trx: BigInt(row?.trx ?? '0'), usdt: BigInt(row?.usdt ?? '0') };
  }

  /**
   * The payout's transaction to sign: the one built before and committed (tron_sign_attempts) while
   * it has time left — a process killed while the signer answered asks again for the same bytes —
   * else a new one, committed before the signer sees it.
   */
  private async attemptOf(payoutId: string, treasury: string, to: string, asset: TronAsset, amount: bigint): Promise<BuiltTransfer> {
    const { sql } = this.options;
    const [stored] = await sql<{ raw_data: Record<string, unknown>; raw_data_hex: string; txid: string; expiration_ms: string }[]>`
      select raw_data, raw_data_hex, txid, expiration_ms::text from tron_sign_attempts where payout_id = ${payoutId}`;
    if (stored && BigInt(stored.expiration_ms) > BigInt(Date.now() + ATTEMPT_MARGIN_MS)) {
      const raw = decodeRawTransaction(Buffer.from(stored.raw_data_hex, 'hex'));
      return { raw, rawDataHex: stored.raw_data_hex, rawData: stored.raw_data, txid: stored.txid };
    }
    const built = await this.build(treasury, to, asset, amount);
    await sql`
      insert into tron_sign_attempts (payout_id, txid, raw_data, raw_data_hex, expiration_ms)
      values (${payoutId}, ${built.txid}, ${sql.json(built.rawData as never)}, ${built.rawDataHex}, ${built.raw.expiration.toString()})
      on conflict (payout_id) do update set txid = excluded.txid, raw_data = excluded.raw_data, raw_data_hex = excluded.raw_data_hex,
        expiration_ms = excluded.expiration_ms, created_at = now()`;
    return built;
  }

  /**
   * The node builds the transfer; the processor refuses one that is not exactly what it asked
   * (a node is not trusted with the destination or the amount: the signer checks them again), then
   * sets the expiration PAYOUT_TRON_LIFETIME ahead and recomputes the txID.
   */
  private async build(treasury: string, to: string, asset: TronAsset, amount: bigint): Promise<BuiltTransfer> {
    const { node, usdtContract, feeLimitSun, lifetimeMs } = this.options;
    const made: NodeTransaction = asset === 'TRX' ? await node.createTransfer(treasury, to, amount) : await node.createTokenTransfer(usdtContract, treasury, to, amount, feeLimitSun);
    const raw = decodeRawTransaction(Buffer.from(made.raw_data_hex, 'hex'));
    const c = raw.contract;
    const exact =
      asset === 'TRX'
        ? c.type === 'TransferContract' && c.owner === treasury && c.to === to && c.amount === amount
        : c.type === 'TriggerSmartContract' && c.owner === treasury && c.contract === usdtContract && c.callValue === 0n && raw.feeLimit === feeLimitSun &&
          decodeTrc20Transfer(c.data)?.recipient === to && decodeTrc20Transfer(c.data)?.amount === amount;
    if (!exact) throw new Error(`the node built another ${asset} transfer than asked (to ${to}, ${amount})`);
    const extended: TronRawTransaction = { ...raw, expiration: BigInt(Date.now() + lifetimeMs) };
    const bytes = encodeRawTransaction(extended);
    return { raw: extended, rawDataHex: Buffer.from(bytes).toString('hex'), rawData: { ...made.raw_data, expiration: Number(extended.expiration) }, txid: tronTxid(bytes) };
  }

  /** The signer's signature; a refusal rolls the claim back and leaves the payout alone a while. */
  private async sign(payoutId: string, rawDataHex: string, txid: string): Promise<string> {
    let answer;
    try {
      answer = await this.options.signer.signTronTransaction({ network: 'tron', purpose: { case: 'payout', value: { payoutId } }, rawDataHex });
    } catch (err) {
      const refusal = ConnectError.from(err);
      if (refusal.code !== Code.PermissionDenied) throw err;
      this.options.metrics.signerRefusals.inc({ network: 'tron', purpose: 'payout' });
      this.refused.leave(payoutId, REFUSAL_BACKOFF_MS);
      this.logger.error({ payoutId, refusal: refusal.rawMessage }, 'the signer refused to sign; left alone for a while');
      throw new SignerRefused(refusal.rawMessage);
    }
    if (answer.txid !== txid || !/^[0-9a-f]{130}$/.test(answer.signature)) throw new Error(`the signer answered for ${answer.txid}, not ${txid}`);
    return answer.signature;
  }

  private async updateGauges(treasury: string): Promise<void> {
    const { sql, node, metrics } = this.options;
    const trx = await node.balance(treasury);
    const usdt = this.options.usdtContract === '' ? undefined : await node.tokenBalance(this.options.usdtContract, treasury);
    const [inFlight] = await sql<{ count: number; oldest: number | null }[]>`
      select count(*)::int as count, extract(epoch from now() - min(claimed_at))::float8 as oldest
      from payouts where status = 'Pending' and claimed_by = ${this.processorId}`;
    metrics.treasuryBalance.set({ network: 'tron', asset: 'TRX' }, Number(trx));
    if (usdt !== undefined) metrics.treasuryBalance.set({ network: 'tron', asset: 'USDT' }, Number(usdt));
    metrics.payoutsInFlight.set({ network: 'tron' }, inFlight?.count ?? 0);
    metrics.oldestInFlightSeconds.set({ network: 'tron' }, inFlight?.oldest ?? 0);
  }
}
