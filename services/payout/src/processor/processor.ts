/**
 * The payout processor of one EVM network (the `process ethereum` role, docs/treasury.md#processor).
 *
 * - One active per network: a session-level advisory lock held on a reserved connection; the
 *   others stand by and retry every poll; when the active one dies its connection closes, the
 *   lock is free and a standby takes over from what the tables say.
 * - A transfer is: assign the nonce (evm_accounts, row lock), ask the signer, store the signed
 *   bytes and hash (chain_transactions, `signed`) in the transaction that claims the payout or the
 *   sweep tasks, commit, THEN broadcast. A process killed anywhere leaves at most the stored bytes,
 *   which the next round broadcasts again — never a second signature for the same transfer, except
 *   a fee replacement, which reuses the nonce so only one version can ever be mined.
 * - Each round: move next nonces up to the chain's (a transaction the processor did not make),
 *   record what the chain says about every open row (receipt, canonical block, confirmations; at
 *   the network's count complete or reject the payout, confirm the sweep), re-broadcast stored
 *   `signed` rows, replace stuck ones, pay, sweep. A failure of one nonce group or sweep group is
 *   contained to it (logged, counted, left for later); only a silent node fails the round.
 * - Gas and fees stay within the signer's caps (fees.ts): nothing is asked that it would refuse.
 */
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import { eventTransaction, type EventTransaction, type Logger, type Sql, type TransactionSql } from '@coinvoice/runtime';
import { SignerService } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { SignEvmTransactionRequestSchema } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { storedMethod } from '../domain/requests';
import { Decimal, toBaseUnits } from '@coinvoice/domain/money';
import { stageOf } from '../domain/status';
import { applyTrigger } from '../transitions';
import { lockPayout, recordPayoutTransaction, type PayoutRow } from '../store/payouts';
import { recordSignerRefusal } from '../store/treasury';
import { erc20TransferData, EvmNodeError, type EvmFees, type EvmNode, type EvmReceipt } from './evm-node';
import { clampFees, ETH_TRANSFER_GAS, payoutGasLimit, replacementFees, type SignerCaps } from './fees';
import type { ProcessorMetrics } from './metrics';
import { claimablePayouts } from './claimable';
import { LeftAlone } from './left-alone';
import { describe, FailureStreak, refusable, RoundLoop, SignerRefused } from './round-loop';
import { EVM_ASSETS, type EvmAsset } from './settings';
import {
  ensureAccount,
  findTransaction,
  hasAccount,
  insertChainTransaction,
  isPaused,
  lockPendingTasks,
  markBroadcast,
  openSweepGroups,
  openTransactions,
  confirmedFromNonce,
  recentSenders,
  saveTreasury,
  sendersInFlight,
  signedTransactions,
  stuckTransactions,
  takeNonce,
  treasuryOutflowInFlight,
  type ChainTransactionRow,
  type NewChainTransaction,
  type SweepGroup,
} from './store';

type SignRequest = MessageInitShape<typeof SignEvmTransactionRequestSchema>;

/** How often, and how far back, every recent sender is checked for lost transactions (docs/treasury.md#deep-reorgs). */
const LOST_SCAN_INTERVAL_MS = 5 * 60_000;
const LOST_SCAN_LOOKBACK_MS = 24 * 3_600_000;

/**
 * Gas of a payout whose estimate reverts (e.g. a blacklisted destination, a contract refusing ETH):
 * it is still sent (at most SIGNER_MAX_GAS_LIMIT), so that the chain's verdict, with its reason,
 * rejects the payout (docs/treasury.md#processor).
 */
const FALLBACK_PAYOUT_GAS = 100_000n;
/** How often the wait of one payout the treasury cannot cover is logged again. */
const UNCOVERED_LOG_EVERY_MS = 5 * 60_000;
/** How long a payout or sweep the signer refused is left alone before it is asked again. */
const REFUSAL_BACKOFF_MS = 5 * 60_000;
/** How long a sweep group whose step failed (e.g. its estimate reverts) is left alone. */
const SWEEP_FAILURE_BACKOFF_MS = 60_000;
/** Payouts sent per round at most. */
const PAYOUTS_PER_ROUND = 50;
/**
 * Claimable payouts looked at per round, oldest first (docs/treasury.md#payouts-that-cannot-go-yet):
 * far more than are sent, so that the ones the treasury cannot cover never hide those after them.
 */
const PAYOUTS_CONSIDERED_PER_ROUND = 1_000;

export interface EvmProcessorOptions {
  network: string;
  sql: Sql;
  node: EvmNode;
  signer: Client<typeof SignerService>;
  logger: Logger;
  metrics: ProcessorMetrics;
  /** Token contracts of the network (USDT, USDC). */
  contracts: Readonly<Record<'USDT' | 'USDC', string>>;
  confirmations: number;
  pollMs: number;
  replaceAfterMs: number;
  /** PAYOUT_AUTO_MAX_<ASSET>, decimal amounts. */
  autoMax: Readonly<Record<EvmAsset, string>>;
  /** SWEEP_DUST_<ASSET>, base units. */
  dust: Readonly<Record<EvmAsset, bigint>>;
  /** The signer's gas and fee caps (SIGNER_MAX_*): nothing is asked beyond them. */
  caps: SignerCaps;
  /** One round of the sweep intake: new accounted deposits become sweep tasks; answers how many. */
  takeInDeposits: () => Promise<number>;
  /** TREASURY_MIN_BALANCE_<ASSET>, base units: below it, `treasury_balance_below_minimum` is 1 (an alert). */
  treasuryMinimum?: Readonly<Record<EvmAsset, bigint>>;
  /** PAYOUT_STUCK_AFTER: payouts in flight longer than this are counted in `payouts_stuck` (an alert). */
  stuckAfterMs?: number;
}


const minOf = (...values: bigint[]): bigint => values.reduce((a, b) => (a < b ? a : b));

export class EvmProcessor extends RoundLoop {
  private treasury: string | undefined;
  private chainId: bigint | undefined;
  /** Payouts (`payout:<id>`) and sweep groups the signer refused, or left for a while for another reason. */
  private readonly refused = new LeftAlone();
  /** Payouts whose wait for the treasury was logged lately. */
  private readonly uncoveredLogged = new LeftAlone();
  private readonly intakeFailures = new FailureStreak();
  /** Stuck transactions whose replacement the caps leave no room for (logged once each). */
  private readonly unreplaceable = new Set<string>();
  /** The chain's nonce (latest block) per address, read at most once a round. */
  private readonly chainNonces = new Map<string, bigint>();
  /** Lost confirmed transactions already reported: the incident is logged once per process. */
  private readonly restoredLost = new Set<string>();
  /** When the last day's senders were last checked for lost transactions (restoreLostTransactions). */
  private lostScanAt = 0;
  /** Whether new transfers wait for the base fee to fall under SIGNER_MAX_FEE_PER_GAS_WEI. */
  private waitingForFees = false;

  constructor(private readonly options: EvmProcessorOptions) {
    super(options);
  }

  /** The treasury address (from the signer, docs/treasury.md#keys) and the chain id, once per process. */
  private async setUp(): Promise<string> {
    if (this.treasury && this.chainId !== undefined) return this.treasury;
    const { network, sql, node, signer } = this.options;
    const answer = await this.treasuryAnswer(async () => ({ address: (await signer.getTreasury({ network })).address }));
    const treasury = answer.address;
    if (!/^0x[0-9a-fA-F]{40}$/.test(treasury)) throw new Error(`the signer answered a malformed treasury address for ${network}`);
    this.chainId = await node.chainId();
    // Without the signer: this round follows what is in flight; the next asks it again.
    if (!answer.fromSigner) return treasury.toLowerCase();
    await saveTreasury(sql, network, { address: treasury });
    if (!(await hasAccount(sql, network, treasury))) await ensureAccount(sql, network, treasury, await node.minedNonce(treasury));
    this.treasury = treasury.toLowerCase();
    this.logger.info({ treasury, chainId: this.chainId.toString() }, 'treasury address from the signer');
    return this.treasury;
  }

  /** One round (docs/treasury.md#processor). */
  async round(): Promise<void> {
    this.chainNonces.clear();
    const treasury = await this.setUp();
    const head = await this.options.node.blockNumber();
    await this.resyncNonce(treasury);
    await this.restoreLostTransactions(treasury);
    await this.record(head);
    await this.rebroadcastSigned();
    await this.replaceStuck();
    // The pause switch stops new transfers; what is in flight is still followed to its end.
    if (!(await isPaused(this.options.sql, this.options.network))) {
      // Payouts before sweeps: a payout whose signature was lost (a kill mid-request) is asked
      // again first, so it gets the treasury nonce it was signed for — the signer signs a payout
      // for one nonce only (docs/treasury.md#signer-policy); until then no gas top-up takes one.
      const treasuryNonceHeld = await this.pay(treasury);
      await this.takeInDeposits();
      await this.sweep(treasury, treasuryNonceHeld);
    }
    await this.updateGauges(treasury);
  }

  // ---- 1. record ---------------------------------------------------------------------------

  /** Follows every open row to its receipt, per (address, nonce): the versions of one transfer. */
  private async record(head: bigint): Promise<void> {
    const open = await openTransactions(this.options.sql, this.options.network);
    const groups = new Map<string, ChainTransactionRow[]>();
    for (const row of open) {
      const key = `${row.from_address}:${row.nonce}`;
      groups.set(key, [...(groups.get(key) ?? []), row]);
    }
    for (const [key, rows] of groups) {
      try {
        await this.recordNonce(rows, head);
      } catch (err) {
        // One group whose outcome cannot be recorded must not stop the others, nor pay and sweep.
        this.itemFailed('record', `record:${key}`, err, { transactionHashes: rows.map((r) => r.transaction_hash), payoutId: rows[0]!.payout_id, nonce: rows[0]!.nonce });
      }
    }
  }

  /** A node that does not answer at all fails the round: every item would fail alike. */
  protected autoMaxima(): Readonly<Record<string, string>> {
    return this.options.autoMax;
  }

  protected isTransportFailure(err: unknown): boolean {
    return isTransportFailure(err);
  }

  /** The chain's nonce of `address` at the latest block, read once a round. */
  private async chainNonce(address: string): Promise<bigint> {
    const key = address.toLowerCase();
    let nonce = this.chainNonces.get(key);
    if (nonce === undefined) {
      nonce = await this.options.node.minedNonce(key);
      this.chainNonces.set(key, nonce);
    }
    return nonce;
  }

  /**
   * Moves an address's next nonce up to the chain's when a transaction the processor did not make
   * (an operator's transfer with the seed) used it (docs/treasury.md#nonce-drift). Only up: every
   * nonce at or above next_nonce is one the processor never assigned, so nothing of ours is lost.
   */
  private async resyncNonce(address: string): Promise<void> {
    const { sql, network, metrics } = this.options;
    const chain = await this.chainNonce(address);
    const moved = await sql`
      update evm_accounts set next_nonce = ${chain.toString()}
      where network = ${network} and address = ${address.toLowerCase()} and next_nonce < ${chain.toString()}
      returning 1`;
    if (moved.length === 0) return;
    metrics.nonceResyncs.inc({ network, outcome: 'next_moved' });
    this.logger.error(
      { address, chainNonce: chain.toString() },
      'the chain\'s nonce of a processor address is ahead of the processor\'s: a transaction it did not make (an operator\'s transfer with the seed?); next nonce moved up to the chain\'s',
    );
  }

  /**
   * A reorg deeper than the confirmation count can take transactions recorded `confirmed` off the
   * chain: the chain's nonce falls below them, a Completed payout is unpaid, a confirmed sweep
   * unmoved, and every later transfer of the address waits for a nonce nobody sends. Their stored
   * bytes are sent again — the same transactions, for the same payouts and sweeps; no new
   * signature — for the treasury and every address with a transfer in flight, each round, as an
   * incident (docs/treasury.md#deep-reorgs).
   */
  private async restoreLostTransactions(treasury: string): Promise<void> {
    const { sql, network, node, metrics } = this.options;
    const addresses = new Set([treasury.toLowerCase(), ...(await sendersInFlight(sql, network)).map((a) => a.toLowerCase())]);
    // Every few minutes also each address that sent in the last day (a deposit's sweep, with nothing
    // after it to be held up): a node call per address, so not every round.
    if (Date.now() - this.lostScanAt >= LOST_SCAN_INTERVAL_MS) {
      this.lostScanAt = Date.now();
      for (const address of await recentSenders(sql, network, LOST_SCAN_LOOKBACK_MS)) addresses.add(address.toLowerCase());
    }
    for (const address of addresses) {
      const lost = await confirmedFromNonce(sql, network, address, await this.chainNonce(address));
      for (const row of lost) {
        if (await this.canonicalReceipt(row.transaction_hash)) continue;
        // The incident first, whatever the node makes of the bytes: it pages once per transaction.
        const first = !this.restoredLost.has(row.transaction_hash);
        if (first) {
          this.restoredLost.add(row.transaction_hash);
          metrics.nonceResyncs.inc({ network, outcome: 'lost_rebroadcast' });
          this.logger.error(
            { transactionHash: row.transaction_hash, purpose: row.purpose, payoutId: row.payout_id, from: address, nonce: row.nonce, chainNonce: (await this.chainNonce(address)).toString() },
            'INCIDENT: a transaction recorded confirmed is no longer on the chain (a reorg deeper than the confirmation count); its stored bytes are sent again',
          );
        }
        try {
          await node.sendRawTransaction(row.raw_transaction);
        } catch (err) {
          // Known to the node already (its mempool kept it), or refused (e.g. its fee cap now under
          // the base fee: the signer signs no new version of a completed payout): tried every round.
          if (!(err instanceof EvmNodeError) || err.rpcCode === undefined) throw err;
          if (first && !(await node.knowsTransaction(row.transaction_hash))) {
            this.logger.error({ transactionHash: row.transaction_hash, refusal: err.message }, 'INCIDENT: the node refuses the lost transaction\'s stored bytes; sent again every round (an operator may have to send it)');
          }
        }
      }
    }
  }

  /** A transaction's receipt in a block still on the chain; a receipt of a reorged block (the node has not cleaned it up) is none. */
  private async canonicalReceipt(hash: string): Promise<EvmReceipt | undefined> {
    const { node } = this.options;
    const receipt = await node.receipt(hash);
    return receipt && (await node.blockHashAt(receipt.blockNumber)) === receipt.blockHash ? receipt : undefined;
  }

  private async recordNonce(openRows: ChainTransactionRow[], head: bigint): Promise<void> {
    const { node, sql, network, confirmations } = this.options;
    let mined: { row: ChainTransactionRow; receipt: EvmReceipt } | undefined;
    for (const row of openRows) {
      const receipt = await this.canonicalReceipt(row.transaction_hash);
      if (receipt) {
        mined = { row, receipt };
        break;
      }
    }
    if (!mined) {
      if (await this.supersededByOthers(openRows, head)) return;
      await this.notMined(openRows);
      return;
    }
    const { row, receipt } = mined;
    const depth = head - receipt.blockNumber + 1n;
    const final = depth >= BigInt(confirmations);
    const reason = !receipt.succeeded && final ? await this.revertReason(row, receipt) : undefined;
    await eventTransaction(sql, async (tx) => {
      const status = !final ? 'mined' : receipt.succeeded ? 'confirmed' : 'failed';
      await tx`
        update chain_transactions set status = ${status}, block_number = ${receipt.blockNumber.toString()}, gas_used = ${receipt.gasUsed.toString()}::numeric,
          effective_gas_price = ${receipt.effectiveGasPrice.toString()}::numeric, failure_reason = ${reason ?? null},
          mined_at = coalesce(mined_at, now()), broadcast_at = coalesce(broadcast_at, now()), updated_at = now()
        where id = ${row.id}`;
      // The other versions of the nonce can never be mined now.
      await tx`
        update chain_transactions set status = 'replaced', updated_at = now()
        where network = ${network} and from_address = ${row.from_address} and nonce = ${row.nonce} and id <> ${row.id} and status in ('signed', 'broadcast', 'mined')`;
      if (row.purpose === 'payout') await this.recordPayout(tx, row, Number(minOf(depth, 1_000_000n)), final, receipt.succeeded, reason);
      else if (row.purpose === 'sweep' && final) await this.recordSweep(tx, row, receipt.succeeded);
      else if (row.purpose === 'gas_top_up' && final && !receipt.succeeded) {
        await tx`update sweep_tasks set gas_top_up_transaction_id = null, updated_at = now() where gas_top_up_transaction_id in (select id from chain_transactions where network = ${network} and from_address = ${row.from_address} and nonce = ${row.nonce})`;
      }
    });
    if (final && row.status !== 'confirmed' && row.status !== 'failed') {
      if (!receipt.succeeded) this.options.metrics.failed.inc({ network, purpose: row.purpose });
      this.logger.info(
        { transactionHash: row.transaction_hash, purpose: row.purpose, payoutId: row.payout_id, block: receipt.blockNumber.toString(), succeeded: receipt.succeeded, reason },
        receipt.succeeded ? 'transaction confirmed' : 'transaction reverted on chain',
      );
    }
  }

  /**
   * No version of ours is mined, yet the chain's nonce at final depth (the network's confirmations)
   * is past this nonce: a transaction the processor did not make used it, and none of our versions
   * can ever be mined (docs/treasury.md#nonce-drift). The versions fail with the reason; a payout is
   * rejected (hold released, payout.rejected: the signer signs a payout for one nonce only, so it
   * cannot be sent again — the merchant requests again); sweep tasks are swept again; the next
   * nonce moves up to the chain's. Returns whether it was so.
   */
  private async supersededByOthers(rows: ChainTransactionRow[], head: bigint): Promise<boolean> {
    const { sql, node, network, confirmations, metrics } = this.options;
    const newest = rows[rows.length - 1]!;
    const from = newest.from_address;
    const nonce = BigInt(newest.nonce);
    if ((await this.chainNonce(from)) <= nonce) return false;
    const finalHeight = head - BigInt(confirmations) + 1n;
    if (finalHeight < 0n) return false;
    const finalNonce = await node.minedNonce(from, finalHeight);
    if (finalNonce <= nonce) return false;
    const reason = `nonce ${nonce} of ${from} was used by a transaction the processor did not make (the chain's nonce at block ${finalHeight} is ${finalNonce}); this transaction can never be mined`;
    await eventTransaction(sql, async (tx) => {
      await tx`
        update chain_transactions set status = 'failed', failure_reason = ${reason}, updated_at = now()
        where network = ${network} and from_address = ${from} and nonce = ${newest.nonce} and status in ('signed', 'broadcast', 'mined')`;
      const versions = tx`select id from chain_transactions where network = ${network} and from_address = ${from} and nonce = ${newest.nonce}`;
      if (newest.purpose === 'payout') {
        const locked = await lockPayout(tx, newest.payout_id!);
        if (locked && stageOf(locked.payout) === 'Sending' && locked.payout.claimed_by === this.processorId) {
          const adminNote = `the ${locked.payout.currency} transfer was never sent: the treasury's nonce ${nonce} was used by a transaction the processor did not make (an operator's transfer with the treasury key?); nothing was paid, request the payout again`;
          await applyTrigger(tx, locked.payout, 'reject', { adminNote });
        }
      } else if (newest.purpose === 'sweep') {
        await tx`update sweep_tasks set status = 'pending', updated_at = now() where status = 'sent' and transaction_id in (${versions})`;
      } else {
        await tx`update sweep_tasks set gas_top_up_transaction_id = null, updated_at = now() where gas_top_up_transaction_id in (${versions})`;
      }
    });
    metrics.nonceResyncs.inc({ network, outcome: 'superseded' });
    this.logger.error({ transactionHashes: rows.map((r) => r.transaction_hash), purpose: newest.purpose, payoutId: newest.payout_id, reason }, 'a signed transaction can never be mined (its nonce was used by another transaction); failed, its payout rejected (operator attention needed)');
    await this.resyncNonce(from);
    return true;
  }

  /** No version of the nonce is in a canonical block: a mined one was reorged out, or none was mined yet. */
  private async notMined(rows: ChainTransactionRow[]): Promise<void> {
    const { sql, node } = this.options;
    const reorged = rows.filter((r) => r.status === 'mined');
    if (reorged.length > 0) {
      await sql.begin(async (tx) => {
        for (const row of reorged) {
          await tx`update chain_transactions set status = 'broadcast', block_number = null, mined_at = null, updated_at = now() where id = ${row.id} and status = 'mined'`;
          if (row.payout_id) await tx`update payouts set confirmations = 0, updated_at = now() where id = ${row.payout_id} and status = 'Pending'`;
        }
      });
      this.logger.warn({ transactions: reorged.map((r) => r.transaction_hash) }, 'a mined transaction left the chain (reorg); its stored bytes are broadcast again');
    }
    // The newest version goes to the node again when the node has forgotten it (restart, reorg, pool eviction).
    const newest = rows[rows.length - 1]!;
    if (newest.status === 'signed') return; // the re-broadcast step sends it
    if (!(await node.knowsTransaction(newest.transaction_hash))) await this.broadcast(newest, 're-broadcast');
  }

  private async recordPayout(tx: EventTransaction, row: ChainTransactionRow, depth: number, final: boolean, succeeded: boolean, reason: string | undefined): Promise<void> {
    const payoutId = row.payout_id!;
    const locked = await lockPayout(tx, payoutId);
    if (!locked) throw new Error(`chain transaction ${row.id} names payout ${payoutId}, which does not exist`);
    const { payout } = locked;
    if (stageOf(payout) !== 'Sending' || payout.claimed_by !== this.processorId) {
      // An operator settled it by hand: the chain's outcome is recorded on the row only.
      this.logger.warn({ payoutId, stage: stageOf(payout), claimedBy: payout.claimed_by }, 'payout no longer held by the processor; its transaction is recorded only');
      return;
    }
    await tx`update payouts set confirmations = ${depth}, transaction_hash = ${row.transaction_hash}, updated_at = date_trunc('milliseconds', now()) where id = ${payoutId}`;
    if (!final) return;
    const current: PayoutRow = { ...payout, transaction_hash: row.transaction_hash };
    if (succeeded) {
      if (!(await recordPayoutTransaction(tx, row.transaction_hash, payoutId))) throw new Error(`transaction ${row.transaction_hash} already completed another payout`);
      await applyTrigger(tx, current, 'complete', { transactionHash: row.transaction_hash });
      this.logger.info({ payoutId, transactionHash: row.transaction_hash }, 'payout completed on chain; hold debited');
    } else {
      const adminNote = `the ${payout.currency} transfer reverted on chain (transaction ${row.transaction_hash}): ${reason ?? 'reverted'}`;
      await applyTrigger(tx, current, 'reject', { adminNote });
      // The transition clears the hash of a Rejected payout; the chain's refusal keeps it (0200_treasury.sql).
      await tx`update payouts set transaction_hash = ${row.transaction_hash}, confirmations = ${depth} where id = ${payoutId}`;
      this.logger.warn({ payoutId, transactionHash: row.transaction_hash, reason }, 'payout rejected: the chain reverted its transfer; hold released');
    }
  }

  private async recordSweep(tx: TransactionSql, row: ChainTransactionRow, succeeded: boolean): Promise<void> {
    const versions = tx`select id from chain_transactions where network = ${row.network} and from_address = ${row.from_address} and nonce = ${row.nonce}`;
    if (succeeded) {
      await tx`update sweep_tasks set status = 'confirmed', transaction_id = ${row.id}, updated_at = now() where status = 'sent' and transaction_id in (${versions})`;
    } else {
      // Reverted: the coins are still at the deposit address; the tasks are swept again.
      await tx`update sweep_tasks set status = 'pending', updated_at = now() where status = 'sent' and transaction_id in (${versions})`;
    }
  }

  private async revertReason(row: ChainTransactionRow, receipt: EvmReceipt): Promise<string> {
    const call = this.callOf(row);
    return this.options.node.revertReason({ from: row.from_address, to: call.to, data: call.data, value: call.value, blockNumber: receipt.blockNumber });
  }

  // ---- 2. re-broadcast ---------------------------------------------------------------------

  /** Stored `signed` rows: a process stopped between commit and broadcast. The stored bytes, never a new signature. */
  private async rebroadcastSigned(): Promise<void> {
    for (const row of await signedTransactions(this.options.sql, this.options.network)) {
      // A nonce the chain is past (and no version of ours mined, or record() would have seen it)
      // can never be accepted: it waits for the final-depth check in record() (supersededByOthers).
      if (BigInt(row.nonce) < (await this.chainNonce(row.from_address))) continue;
      await this.broadcast(row, 're-broadcast');
    }
  }

  /**
   * Sends a stored row's bytes. A node that refuses them but knows the transaction ("already
   * known", "nonce too low" with ours mined) counts as accepted. A transport failure throws (the
   * round is retried); any other refusal leaves the row `signed` for the next round.
   */
  private async broadcast(row: ChainTransactionRow, why: 'broadcast' | 're-broadcast'): Promise<boolean> {
    const { node, sql, network, metrics } = this.options;
    try {
      const hash = await node.sendRawTransaction(row.raw_transaction);
      if (hash !== row.transaction_hash) throw new Error(`the node reports hash ${hash} for stored transaction ${row.transaction_hash}`);
    } catch (err) {
      if (!(err instanceof EvmNodeError) || err.rpcCode === undefined) throw err;
      if (!(await node.knowsTransaction(row.transaction_hash))) {
        this.logger.warn({ transactionHash: row.transaction_hash, purpose: row.purpose, refusal: err.message }, 'the node refused a stored transaction; it is sent again next round');
        // Its nonce is used: by ours (recorded next round) or by a transaction we did not make.
        if (/nonce too low/i.test(err.message)) {
          this.chainNonces.delete(row.from_address.toLowerCase());
          await this.resyncNonce(row.from_address);
        }
        return false;
      }
    }
    if (row.status === 'signed') {
      await markBroadcast(sql, row.id);
      metrics.broadcast.inc({ network, purpose: row.purpose });
    }
    this.logger.info({ transactionHash: row.transaction_hash, purpose: row.purpose, payoutId: row.payout_id, nonce: row.nonce }, why === 'broadcast' ? 'transaction broadcast' : 'stored transaction broadcast again');
    return true;
  }

  // ---- 3. replace --------------------------------------------------------------------------

  /** Transactions not mined after PAYOUT_REPLACE_AFTER: same nonce, fees bumped ≥ 12.5 %. */
  private async replaceStuck(): Promise<void> {
    const { sql, network, node, replaceAfterMs } = this.options;
    const stuck = await stuckTransactions(sql, network, replaceAfterMs);
    if (stuck.length === 0) return;
    const fees = await node.fees();
    for (const old of stuck) {
      try {
        await this.replace(old, fees);
      } catch (err) {
        this.itemFailed('replace', `replace:${old.from_address}:${old.nonce}`, err, { transactionHash: old.transaction_hash, payoutId: old.payout_id, nonce: old.nonce });
      }
    }
  }

  private async replace(old: ChainTransactionRow, fees: EvmFees): Promise<void> {
    const { sql, network, node, caps } = this.options;
    const refusalKey = `replace:${old.id}`;
    if (this.refused.isLeft(refusalKey)) return;
    // The chain is past its nonce: no replacement could be mined (record() settles it at final depth).
    if (BigInt(old.nonce) < (await this.chainNonce(old.from_address))) return;
    const replacement = replacementFees(BigInt(old.max_fee_per_gas), BigInt(old.max_priority_fee_per_gas), fees, caps);
    if (!replacement) {
      if (!this.unreplaceable.has(old.id)) {
        this.unreplaceable.add(old.id);
        this.logger.warn(
          { transactionHash: old.transaction_hash, maxFeePerGas: old.max_fee_per_gas, maxPriorityFeePerGas: old.max_priority_fee_per_gas },
          'a stuck transaction cannot be replaced within SIGNER_MAX_FEE_PER_GAS_WEI / SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI; it waits to be mined as it is',
        );
      }
      return;
    }
    const priority = replacement.maxPriorityFeePerGas;
    const maxFee = replacement.maxFeePerGas;
    const gas = BigInt(old.gas_limit);
    let amount = BigInt(old.amount);
    if (old.purpose === 'sweep' && old.asset === 'ETH') {
      // An ETH sweep sends its balance less gas: a higher fee leaves less to send.
      amount -= gas * (maxFee - BigInt(old.max_fee_per_gas));
      if (amount <= 0n) return;
    } else if (old.purpose === 'sweep' && gas * maxFee > (await node.balance(old.from_address))) {
      this.logger.warn({ transactionHash: old.transaction_hash }, 'a stuck token sweep cannot pay a higher fee from its gas; left waiting');
      return;
    }
    const row = await refusable(sql.begin(async (tx) => {
      if (old.purpose === 'payout') {
        const locked = await lockPayout(tx, old.payout_id!);
        if (!locked || stageOf(locked.payout) !== 'Sending' || locked.payout.claimed_by !== this.processorId) return undefined;
      }
      const signed = await this.sign(tx, await this.purposeOf(old), {
        purpose: old.purpose,
        payoutId: old.payout_id,
        from: old.from_address,
        to: old.to_address,
        asset: old.asset as EvmAsset,
        amount,
        nonce: BigInt(old.nonce),
        gasLimit: gas,
        fees: { baseFeePerGas: fees.baseFeePerGas, maxFeePerGas: maxFee, maxPriorityFeePerGas: priority },
        replaces: old.id,
      }, refusalKey);
      if (old.purpose === 'payout') await tx`update payouts set transaction_hash = ${signed.transaction_hash}, updated_at = date_trunc('milliseconds', now()) where id = ${old.payout_id}`;
      if (old.purpose === 'sweep') await tx`update sweep_tasks set transaction_id = ${signed.id}, updated_at = now() where transaction_id = ${old.id} and status = 'sent'`;
      if (old.purpose === 'gas_top_up') await tx`update sweep_tasks set gas_top_up_transaction_id = ${signed.id}, updated_at = now() where gas_top_up_transaction_id = ${old.id}`;
      return signed;
    }));
    if (!row) return;
    this.options.metrics.replaced.inc({ network, purpose: old.purpose });
    this.logger.warn(
      { replaced: old.transaction_hash, transactionHash: row.transaction_hash, nonce: old.nonce, maxFeePerGas: maxFee.toString(), purpose: old.purpose },
      'transaction not mined in time: replaced with a higher fee (same nonce)',
    );
    await this.broadcast(row, 'broadcast');
  }

  /** The signer's purpose of a stored row (a replacement asks for the same one). */
  private async purposeOf(row: ChainTransactionRow): Promise<SignRequest['purpose']> {
    if (row.purpose === 'payout') return { case: 'payout', value: { payoutId: row.payout_id! } };
    const deposit = row.purpose === 'sweep' ? row.from_address : row.to_address;
    const [task] = await this.options.sql<{ address_index: number }[]>`
      select address_index from sweep_tasks where network = ${row.network} and lower(deposit_address) = ${deposit} limit 1`;
    if (!task) throw new Error(`no sweep task names address ${deposit}`);
    return row.purpose === 'sweep' ? { case: 'sweep', value: { addressIndex: task.address_index, asset: row.asset } } : { case: 'gasTopUp', value: { addressIndex: task.address_index } };
  }

  /**
   * The node's fees within the signer's caps, or undefined while the base fee alone reaches
   * SIGNER_MAX_FEE_PER_GAS_WEI: then new transfers wait (logged once, payout_processor_fee_cap_waiting)
   * rather than be refused by the signer round after round.
   */
  private async currentFees(): Promise<EvmFees | undefined> {
    const { node, caps, network, metrics } = this.options;
    const fees = clampFees(await node.fees(), caps);
    if (!fees) {
      if (!this.waitingForFees) {
        this.waitingForFees = true;
        metrics.feeCapWaiting.set({ network }, 1);
        this.logger.warn({ maxFeePerGas: caps.maxFeePerGas.toString() }, 'the base fee reaches SIGNER_MAX_FEE_PER_GAS_WEI: new payouts and sweeps wait for it to fall');
      }
      return undefined;
    }
    if (this.waitingForFees) {
      this.waitingForFees = false;
      metrics.feeCapWaiting.set({ network }, 0);
      this.logger.info({ baseFeePerGas: fees.baseFeePerGas.toString() }, 'the base fee is under SIGNER_MAX_FEE_PER_GAS_WEI again: payouts and sweeps go on');
    }
    return fees;
  }

  // ---- 4. sweep ----------------------------------------------------------------------------

  /** The sweep intake; the invoice service unreachable delays sweeps only, never payouts. */
  private async takeInDeposits(): Promise<void> {
    try {
      await this.options.takeInDeposits();
      const failedRounds = this.intakeFailures.recovered();
      if (failedRounds > 0) this.logger.info({ failedRounds }, 'sweep intake recovered');
    } catch (err) {
      if (this.intakeFailures.failed()) {
        this.logger.warn({ err: describe(err), failedRounds: this.intakeFailures.failures }, 'sweep intake failed (invoice service unavailable?); sweeps of known tasks go on');
      }
    }
  }

  private async sweep(treasury: string, treasuryNonceHeld: boolean): Promise<void> {
    const { sql, network, node } = this.options;
    const groups = await openSweepGroups(sql, network);
    if (groups.length === 0) return;
    const fees = await this.currentFees();
    if (!fees) return;
    for (const group of groups) {
      // A sweep of this address is in flight: new deposits wait until it is confirmed.
      if (group.sent > 0 || group.pending === 0) continue;
      const refusalKey = `sweep:${group.deposit_address.toLowerCase()}:${group.asset}`;
      if (this.refused.isLeft(refusalKey)) continue;
      try {
        if (group.asset === 'ETH') await this.sweepEth(group, treasury, fees);
        else if (group.asset === 'USDT' || group.asset === 'USDC') await this.sweepToken(group, group.asset, treasury, fees, treasuryNonceHeld);
        else this.logger.warn({ asset: group.asset, depositAddress: group.deposit_address }, 'sweep task of an asset this processor does not know; left pending');
      } catch (err) {
        // E.g. the token's transfer from this address reverts (a blacklisted deposit address): that
        // group backs off, the later deposits of every asset are still swept.
        this.itemFailed('sweep', refusalKey, err, { depositAddress: group.deposit_address, asset: group.asset });
        this.refused.leave(refusalKey, SWEEP_FAILURE_BACKOFF_MS);
      }
    }
  }

  private async sweepEth(group: SweepGroup, treasury: string, fees: EvmFees): Promise<void> {
    const { node } = this.options;
    const deposit = group.deposit_address.toLowerCase();
    const settled = await this.settledHeight();
    // Only money at the confirmation count (docs/treasury.md#sweep-tasks): a payment still
    // unconfirmed can leave the chain, and a sweep that spent it could then never be mined.
    const balance = minOf(await node.balance(deposit), await node.balance(deposit, settled));
    const gasCost = ETH_TRANSFER_GAS * fees.maxFeePerGas;
    const value = balance - gasCost;
    const dust = this.options.dust.ETH;
    if (value < dust) {
      await this.skipDust(group, `balance ${balance} wei less the sweep's gas (at most ${gasCost} wei) is ${value} wei, below SWEEP_DUST_ETH (${dust} wei)`);
      return;
    }
    await this.sendSweep(group, { from: deposit, to: treasury, asset: 'ETH', amount: value, gasLimit: ETH_TRANSFER_GAS, fees });
  }

  /**
   * A token deposit: its address has no ETH for gas, so the treasury first sends exactly
   * gas × max fee less what it holds (a gas_top_up); once that is mined, transfer(treasury, balance).
   */
  private async sweepToken(group: SweepGroup, asset: 'USDT' | 'USDC', treasury: string, fees: EvmFees, treasuryNonceHeld: boolean): Promise<void> {
    const { node, sql } = this.options;
    const deposit = group.deposit_address.toLowerCase();
    const contract = this.options.contracts[asset];
    const settled = await this.settledHeight();
    // Only tokens at the confirmation count, as for ETH (sweepEth).
    const tokens = minOf(await node.tokenBalance(contract, deposit), await node.tokenBalance(contract, deposit, settled));
    const dust = this.options.dust[asset];
    if (tokens < dust || tokens === 0n) {
      await this.skipDust(group, `token balance ${tokens} is below SWEEP_DUST_${asset} (${dust} base units)`);
      return;
    }
    const gas = await node.estimateGas({ from: deposit, to: contract, data: erc20TransferData(treasury, tokens), value: 0n });
    const ethBalance = await node.balance(deposit);
    const topUp = group.top_up_id ? await findTransaction(sql, group.top_up_id) : undefined;
    if (topUp && (topUp.status === 'signed' || topUp.status === 'broadcast')) return; // wait for it
    const toppedUp = topUp !== undefined && (topUp.status === 'mined' || topUp.status === 'confirmed');
    // The top-up is sized at the next block's base fee + 25 % (two full blocks' rise) + the priority
    // fee, not at the 2 × base fee of other transfers: what the sweep does not spend stays at the
    // deposit address for good (services/payout/README.md, "Processor").
    const topUpPrice = minOf(fees.baseFeePerGas + fees.baseFeePerGas / 4n + fees.maxPriorityFeePerGas, fees.maxFeePerGas);
    // After a mined top-up the sweep pays what the address holds (the fee may have moved since):
    // another top-up only when that no longer covers the current base fee.
    const affordableMaxFee = minOf(ethBalance / gas, this.options.caps.maxFeePerGas);
    const priority = minOf(fees.maxPriorityFeePerGas, affordableMaxFee);
    if (ethBalance >= gas * topUpPrice || (toppedUp && affordableMaxFee >= fees.baseFeePerGas + priority)) {
      // After a top-up the whole of it is the sweep's fee ceiling: the cost is the effective price
      // either way, and the widest ceiling keeps the sweep includable if the base fee rises.
      const maxFee = toppedUp ? affordableMaxFee : minOf(fees.maxFeePerGas, affordableMaxFee);
      await this.sendSweep(group, { from: deposit, to: treasury, asset, amount: tokens, gasLimit: gas, fees: { ...fees, maxFeePerGas: maxFee, maxPriorityFeePerGas: minOf(priority, maxFee) } });
      return;
    }
    // A top-up is a treasury transfer: it waits while a payout may hold the next treasury nonce.
    if (treasuryNonceHeld) return;
    const need = gas * topUpPrice - ethBalance;
    const row = await refusable(sql.begin(async (tx) => {
      const tasks = await lockPendingTasks(tx, this.options.network, deposit, asset);
      if (tasks.length === 0) return undefined;
      const signed = await this.sign(tx, { case: 'gasTopUp', value: { addressIndex: group.address_index } }, {
        purpose: 'gas_top_up',
        payoutId: null,
        from: treasury,
        to: deposit,
        asset: 'ETH',
        amount: need,
        nonce: undefined,
        gasLimit: ETH_TRANSFER_GAS,
        fees,
        replaces: null,
      }, `sweep:${deposit}:${asset}`);
      await tx`update sweep_tasks set gas_top_up_transaction_id = ${signed.id}, updated_at = now() where id in ${tx(tasks.map((t) => t.id))}`;
      return signed;
    }));
    if (!row) return;
    this.logger.info({ depositAddress: deposit, asset, gas: gas.toString(), topUpWei: need.toString(), transactionHash: row.transaction_hash }, 'gas top-up for a token sweep signed');
    await this.broadcast(row, 'broadcast');
  }

  /** The highest block with the network's confirmation count: what is final for the sweeps. */
  private async settledHeight(): Promise<bigint> {
    const head = await this.options.node.blockNumber();
    const height = head - BigInt(this.options.confirmations) + 1n;
    return height < 0n ? 0n : height;
  }

  private async sendSweep(group: SweepGroup, transfer: { from: string; to: string; asset: EvmAsset; amount: bigint; gasLimit: bigint; fees: EvmFees }): Promise<void> {
    const { sql, network, node } = this.options;
    if (!(await hasAccount(sql, network, transfer.from))) await ensureAccount(sql, network, transfer.from, await node.minedNonce(transfer.from));
    else await this.resyncNonce(transfer.from);
    const row = await refusable(sql.begin(async (tx) => {
      const tasks = await lockPendingTasks(tx, network, transfer.from, transfer.asset);
      if (tasks.length === 0) return undefined;
      const signed = await this.sign(tx, { case: 'sweep', value: { addressIndex: group.address_index, asset: transfer.asset } }, {
        purpose: 'sweep',
        payoutId: null,
        ...transfer,
        nonce: undefined,
        replaces: null,
      }, `sweep:${transfer.from}:${transfer.asset}`);
      await tx`update sweep_tasks set status = 'sent', transaction_id = ${signed.id}, updated_at = now() where id in ${tx(tasks.map((t) => t.id))}`;
      return signed;
    }));
    if (!row) return;
    this.logger.info({ depositAddress: transfer.from, asset: transfer.asset, amount: transfer.amount.toString(), transactionHash: row.transaction_hash }, 'sweep signed');
    await this.broadcast(row, 'broadcast');
  }

  private async skipDust(group: SweepGroup, reason: string): Promise<void> {
    await this.options.sql`
      update sweep_tasks set status = 'skipped_dust', skip_reason = ${reason}, updated_at = now()
      where network = ${this.options.network} and deposit_address = ${group.deposit_address} and asset = ${group.asset} and status = 'pending'`;
    this.logger.info({ depositAddress: group.deposit_address, asset: group.asset, reason }, 'sweep skipped: dust');
  }

  // ---- 5. pay ------------------------------------------------------------------------------

  /**
   * Live verified Pending payouts not yet claimed, approved or within PAYOUT_AUTO_MAX_<ASSET>,
   * oldest first — except that a payout whose signature was asked for and never stored comes
   * first (payout_sign_attempts): the signer may have signed it for the treasury's next nonce, and
   * signs a payout for one nonce only. Returns true while such a payout is still unsigned: then no
   * other transfer may take a treasury nonce this round.
   */
  private async pay(treasury: string): Promise<boolean> {
    const { sql, network, node } = this.options;
    // Attempts of payouts no longer claimable (cancelled, claimed by an operator) no longer matter.
    await sql`delete from payout_sign_attempts a using payouts p where p.id = a.payout_id and a.network = ${network} and (p.status <> 'Pending' or p.claimed_at is not null)`;
    const leftAlone = this.refused.keys('payout:');
    const candidates = await sql<(PayoutRow & { attempted: boolean })[]>`
      select p.*, (a.payout_id is not null) as attempted from payouts p
      left join payout_sign_attempts a on a.payout_id = p.id and a.network = ${network}
      where ${claimablePayouts(sql, network, this.options.autoMax)}
        -- Refused by the signer lately (docs/treasury.md#payouts-that-cannot-go-yet), unless maybe signed for a nonce.
        and (a.payout_id is not null or p.id <> all(${leftAlone}::uuid[]))
      order by (a.payout_id is not null) desc, p.created_at, p.id
      limit ${PAYOUTS_CONSIDERED_PER_ROUND}`;
    if (candidates.length === 0) return false;
    const fees = await this.currentFees();
    // Waiting for the base fee: a payout maybe signed for the next nonce still holds the queue.
    if (!fees) return candidates.some((c) => c.attempted);
    const outflow = await treasuryOutflowInFlight(sql, network, treasury);
    const balances: Partial<Record<EvmAsset, bigint>> = {};
    const balanceOf = async (asset: EvmAsset) => (balances[asset] ??= asset === 'ETH' ? await node.balance(treasury) : await node.tokenBalance(this.options.contracts[asset], treasury));
    let sent = 0;
    for (const { attempted, ...payout } of candidates) {
      if (!this.running || sent >= PAYOUTS_PER_ROUND) return false;
      if (this.refused.isLeft(`payout:${payout.id}`)) continue;
      const asset = payout.currency as EvmAsset;
      const amount = toBaseUnits(new Decimal(payout.amount), storedMethod(asset, payout.network).baseUnitDecimals);
      // Not covered even before its gas: no estimate asked of the node (a long queue of such payouts is looked at every round).
      const short = asset === 'ETH' ? (await balanceOf('ETH')) < outflow.gas + (outflow.amount.ETH ?? 0n) + amount : (await balanceOf(asset)) < (outflow.amount[asset] ?? 0n) + amount;
      if (short) {
        this.uncoveredWait(payout);
        if (attempted) return true;
        continue;
      }
      const to = payout.address.toLowerCase();
      const call = asset === 'ETH' ? { to, data: '0x', value: amount } : { to: this.options.contracts[asset], data: erc20TransferData(to, amount), value: 0n };
      let gasLimit: bigint;
      try {
        // ETH too: a contract wallet (a Safe) spends gas in its receive(); 21,000 exactly for an account without code.
        gasLimit = payoutGasLimit(await node.estimateGas({ from: treasury, ...call }), this.options.caps);
      } catch (err) {
        if (isTransportFailure(err)) throw err;
        this.logger.warn({ payoutId: payout.id, refusal: describe(err).message }, 'the node estimates that the transfer of a payout would revert; sent anyway so that the chain decides (and the payout is rejected with its reason) once the treasury covers it');
        gasLimit = minOf(FALLBACK_PAYOUT_GAS, this.options.caps.maxGasLimit);
      }
      // The treasury must cover it beside everything already leaving it (not yet mined).
      const gasCost = gasLimit * fees.maxFeePerGas;
      const ethNeeded = outflow.gas + gasCost + (outflow.amount.ETH ?? 0n) + (asset === 'ETH' ? amount : 0n);
      const assetNeeded = asset === 'ETH' ? ethNeeded : (outflow.amount[asset] ?? 0n) + amount;
      if ((await balanceOf('ETH')) < ethNeeded || (await balanceOf(asset)) < assetNeeded) {
        this.uncoveredWait(payout);
        // A payout maybe signed for the next nonce holds the queue until it can be sent.
        if (attempted) return true;
        // Looked at first again next round: it keeps its place for the money that comes in.
        continue;
      }
      // Committed before the signer is asked: outlives a process killed before the signed bytes are stored.
      await sql`insert into payout_sign_attempts (payout_id, network) values (${payout.id}, ${network}) on conflict (payout_id) do nothing`;
      const row = await refusable(eventTransaction(sql, async (tx) => {
        // Claimed by nobody and still what was selected: anything else (a cancel, another claim) wins.
        const [locked] = await tx<PayoutRow[]>`
          select * from payouts where id = ${payout.id} and status = 'Pending' and claimed_at is null
          for update skip locked`;
        if (!locked || locked.amount !== payout.amount || locked.address !== payout.address || locked.currency !== payout.currency) return undefined;
        const signed = await this.sign(tx, { case: 'payout', value: { payoutId: payout.id } }, {
          purpose: 'payout',
          payoutId: payout.id,
          from: treasury,
          to,
          asset,
          amount,
          nonce: undefined,
          gasLimit,
          fees,
          replaces: null,
        }, `payout:${payout.id}`);
        await tx`delete from payout_sign_attempts where payout_id = ${payout.id}`;
        const claimed = await applyTrigger(tx, locked, 'claim', { claimedBy: this.processorId });
        await tx`
          update payouts set transaction_hash = ${signed.transaction_hash}, confirmations = 0, signer_refusal = null, signer_refused_at = null
          where id = ${claimed.id}`;
        return signed;
      }), (refusal) => recordSignerRefusal(sql, payout.id, refusal));
      if (!row) {
        // Refused (the signer signed nothing) or no longer claimable: nothing to hold the queue for.
        await sql`delete from payout_sign_attempts where payout_id = ${payout.id}`;
        continue;
      }
      outflow.gas += gasCost;
      outflow.amount[asset] = (outflow.amount[asset] ?? 0n) + amount;
      this.logger.info({ payoutId: payout.id, asset, amount: payout.amount, transactionHash: row.transaction_hash, nonce: row.nonce }, 'payout claimed and signed');
      sent++;
      await this.broadcast(row, 'broadcast');
    }
    return false;
  }

  /** A payout the treasury cannot cover now waits; said once every few minutes per payout, not every round. */
  private uncoveredWait(payout: PayoutRow): void {
    if (this.uncoveredLogged.isLeft(payout.id)) return;
    this.uncoveredLogged.leave(payout.id, UNCOVERED_LOG_EVERY_MS);
    this.logger.warn({ payoutId: payout.id, asset: payout.currency, amount: payout.amount }, 'the treasury cannot cover this payout now; it waits (fund the treasury)');
  }

  // ---- signing -----------------------------------------------------------------------------

  /** The call a stored row makes: ETH as value, a token as transfer(to, amount) on its contract. */
  private callOf(row: { to_address: string; asset: string; amount: string }): { to: string; data: string; value: bigint } {
    if (row.asset === 'ETH') return { to: row.to_address, data: '0x', value: BigInt(row.amount) };
    const contract = this.options.contracts[row.asset as 'USDT' | 'USDC'];
    if (!contract) throw new Error(`no contract for ${row.asset}`);
    return { to: contract, data: erc20TransferData(row.to_address, BigInt(row.amount)), value: 0n };
  }

  /**
   * Inside the caller's transaction: the nonce (a new one from the sender's row, or the replaced
   * transaction's), the signer's signature, and the stored `signed` row. When the signer refuses
   * (PermissionDenied) it throws SignerRefused, so that the caller's transaction rolls back and
   * the nonce is not used (a nonce taken and never sent would hold up every later transfer); the
   * payout or sweep is left alone for a while (refusals are the signer's alert).
   */
  private async sign(
    tx: TransactionSql,
    purpose: SignRequest['purpose'],
    t: Omit<NewChainTransaction, 'transactionHash' | 'rawTransaction' | 'nonce' | 'maxFeePerGas' | 'maxPriorityFeePerGas' | 'network'> & { nonce: bigint | undefined; gasLimit: bigint; fees: EvmFees },
    refusalKey?: string,
  ): Promise<ChainTransactionRow> {
    const { network, signer, metrics } = this.options;
    const nonce = t.nonce ?? (await takeNonce(tx, network, t.from));
    const call = this.callOf({ to_address: t.to, asset: t.asset, amount: t.amount.toString() });
    let answer;
    try {
      answer = await signer.signEvmTransaction({
        network,
        purpose,
        transaction: {
          chainId: this.chainId!,
          nonce,
          to: call.to,
          value: call.value.toString(),
          data: call.data,
          gasLimit: t.gasLimit,
          maxFeePerGas: t.fees.maxFeePerGas.toString(),
          maxPriorityFeePerGas: t.fees.maxPriorityFeePerGas.toString(),
        },
      });
    } catch (err) {
      const refusal = ConnectError.from(err);
      if (refusal.code !== Code.PermissionDenied) throw err;
      metrics.signerRefusals.inc({ network, purpose: t.purpose });
      if (refusalKey) this.refused.leave(refusalKey, REFUSAL_BACKOFF_MS);
      this.logger.error({ purpose: t.purpose, payoutId: t.payoutId, refusal: refusal.rawMessage }, 'the signer refused to sign; left alone for a while');
      throw new SignerRefused(refusal.rawMessage);
    }
    if (answer.from.toLowerCase() !== t.from.toLowerCase()) throw new Error(`the signer signed from ${answer.from}, not ${t.from}`);
    return insertChainTransaction(tx, {
      network,
      purpose: t.purpose,
      payoutId: t.payoutId,
      from: t.from,
      to: t.to,
      asset: t.asset,
      amount: t.amount,
      nonce,
      gasLimit: t.gasLimit,
      maxFeePerGas: t.fees.maxFeePerGas,
      maxPriorityFeePerGas: t.fees.maxPriorityFeePerGas,
      transactionHash: answer.transactionHash,
      rawTransaction: answer.rawTransaction,
      replaces: t.replaces,
    });
  }

  // ---- metrics -----------------------------------------------------------------------------

  private async updateGauges(treasury: string): Promise<void> {
    const { sql, network, node, metrics } = this.options;
    // Everything is read before any gauge is set: a scrape never sees one round's gauges half set.
    const balances: [EvmAsset, bigint][] = [];
    for (const asset of EVM_ASSETS) {
      balances.push([asset, asset === 'ETH' ? await node.balance(treasury) : await node.tokenBalance(this.options.contracts[asset], treasury)]);
    }
    const stuckAfterSeconds = (this.options.stuckAfterMs ?? 30 * 60_000) / 1_000;
    const [stuck] = await sql<{ count: number }[]>`
      select count(*)::int as count from payouts
      where status = 'Pending' and claimed_by = ${this.processorId} and claimed_at < now() - make_interval(secs => ${stuckAfterSeconds})`;
    for (const [asset, balance] of balances) {
      metrics.treasuryBalance.set({ network, asset }, Number(balance));
      metrics.treasuryBelowMinimum.set({ network, asset }, balance < (this.options.treasuryMinimum?.[asset] ?? 0n) ? 1 : 0);
    }
    metrics.payoutsStuck.set({ network }, stuck?.count ?? 0);
    const [inFlight] = await sql<{ count: number; oldest: number | null }[]>`
      select count(*)::int as count, extract(epoch from now() - min(claimed_at))::float8 as oldest
      from payouts where status = 'Pending' and claimed_by = ${this.processorId}`;
    metrics.payoutsInFlight.set({ network }, inFlight?.count ?? 0);
    metrics.oldestInFlightSeconds.set({ network }, inFlight?.oldest ?? 0);
    const byStatus = await sql<{ status: string; count: number }[]>`select status, count(*)::int as count from sweep_tasks where network = ${network} group by status`;
    for (const status of ['pending', 'sent', 'confirmed', 'skipped_dust']) metrics.sweepTasks.set({ network, status }, byStatus.find((r) => r.status === status)?.count ?? 0);
  }
}

/** The node did not answer at all (no JSON-RPC error): every item would fail alike, so the round fails. */
function isTransportFailure(err: unknown): boolean {
  return err instanceof EvmNodeError && err.rpcCode === undefined;
}
