/**
 * The payout processor of Bitcoin or Litecoin (the `process bitcoin|litecoin` role,
 * docs/treasury.md#utxo). One active per network (round-loop.ts). Each round:
 * 1. take in accounted deposits as spendable coins (the invoice service's ListAccountedDeposits);
 * 2. record what the chain says about every open batch: a version mined (confirmations counted;
 *    at the network's count every payout of the batch completes once, the other versions are
 *    replaced, the inputs spent, the change a new coin), a mined version that left the chain
 *    (followed again), a batch none of whose versions can ever be mined (an input spent elsewhere
 *    at final depth: its payouts rejected, alerted);
 * 3. ask the signer for versions built and not signed (the stored PSBT, never a new one);
 * 4. broadcast versions signed and not broadcast (the stored bytes);
 * 5. replace a version not mined within PAYOUT_REPLACE_AFTER (BIP125: the same inputs and payout
 *    outputs, the fee out of the change, within the cap);
 * 6. pay: claimable payouts batched (PAYOUT_BATCH_MAX, PAYOUT_BATCH_WAIT) at the Esplora rate for
 *    PAYOUT_CONFIRM_TARGET, not above PAYOUT_MAX_FEE_RATE_<COIN> (above it everything waits).
 * Exactly once: the batch (its payouts claimed, its coins reserved, its unsigned PSBT) is committed
 * before the signer is asked; the signed bytes and txid are committed before the broadcast.
 */
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import { Transaction } from '@scure/btc-signer';
import { errorFacts, eventTransaction, type EventTransaction, type Logger, type Sql } from '@coinvoice/runtime';
import { SignerService } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { Decimal, toBaseUnits } from '@coinvoice/domain/money';
import { formatFeeRate, type FeeRate } from '../../domain/fee-rate';
import { storedMethod } from '../../domain/requests';
import { stageOf } from '../../domain/status';
import { lockPayout, recordPayoutTransaction, type PayoutRow } from '../../store/payouts';
import { applyTrigger } from '../../transitions';
import { claimablePayouts } from '../claimable';
import type { ProcessorMetrics } from '../metrics';
import { describe, FailureStreak, RoundLoop, signerUnreachable } from '../round-loop';
import { isPaused, saveTreasury } from '../store';
import { recordSignerRefusal } from '../../store/treasury';
import { P2WPKH_SCRIPT_BYTES, planBatch, rateForTarget, replacementPlan, type FeeTerms, type PayoutOutput } from './coin-selection';
import { EsploraUnavailable, type EsploraClient, type TxStatus } from './esplora';
import { AccountAddresses, buildPsbt, hrpOf, type KeyBranch } from './psbt';
import {
  availableBalance,
  availableCoins,
  batchCoins,
  batchPayouts,
  batchVersions,
  builtVersions,
  confirmedVersionsFrom,
  insertDepositCoin,
  lockAvailableCoins,
  markVersionBroadcast,
  openBatches,
  signedVersions,
  stuckVersions,
  takeChangeIndex,
  freeChangeIndex,
  recordChangeAddresses,
  type BatchPayoutRow,
  type BatchRow,
  type CoinRow,
  type VersionRow,
} from './store';

/** Waiting payouts looked at per round, oldest first: those the coins cannot pay never hide the ones after them. */
const PAYOUTS_CONSIDERED_PER_ROUND = 1_000;
/** How long a version the signer refused is left alone before it is asked again. */
const REFUSAL_BACKOFF_MS = 5 * 60_000;

export type UtxoNetwork = 'bitcoin' | 'litecoin';

/** One accounted deposit of the network, as the intake hands it over. */
export interface AccountedDepositOutput {
  paymentId: string;
  depositAddress: string;
  addressIndex: number;
  amount: bigint;
}

export interface UtxoProcessorOptions {
  network: UtxoNetwork;
  /** BTC or LTC. */
  asset: string;
  sql: Sql;
  esplora: EsploraClient;
  signer: Client<typeof SignerService>;
  logger: Logger;
  metrics: ProcessorMetrics;
  /** The network's confirmation count (CHAIN_<NETWORK>_CONFIRMATIONS). */
  confirmations: number;
  pollMs: number;
  replaceAfterMs: number;
  /** PAYOUT_AUTO_MAX_<COIN>, a decimal amount. */
  autoMax: string;
  /** PAYOUT_MAX_FEE_RATE_<COIN>. */
  maxFeeRate: FeeRate;
  /** PAYOUT_CONFIRM_TARGET, blocks. */
  confirmTarget: number;
  /** PAYOUT_BATCH_MAX. */
  batchMax: number;
  /** PAYOUT_BATCH_WAIT. */
  batchWaitMs: number;
  /** The coin's dust limit, base units: a smaller change goes to the fee. */
  dust: bigint;
  stuckAfterMs: number;
  /** One round of the deposit intake; `record` stores one deposit (answers 1 when new). */
  takeInDeposits: (record: (deposit: AccountedDepositOutput) => Promise<number>) => Promise<number>;
}

interface Treasury {
  address: string;
  keys: AccountAddresses;
}

/** How far below the tip the deep-reorg scan looks: about a day of Bitcoin blocks. */
const LOST_SCAN_BLOCKS = 144;

export class UtxoProcessor extends RoundLoop {
  private treasury: Treasury | undefined;
  /** The tip the deep-reorg scan last looked from: a chain that did not move lost nothing. */
  private lostScanTip: string | undefined;
  /** Confirmed transactions found lost (the incident is raised once each). */
  private readonly restoredLost = new Set<string>();
  private readonly intakeFailures = new FailureStreak();
  /** Versions the signer refused, until when they are left alone. */
  private readonly refused = new Map<string, number>();
  /**
   * Payouts of a batch the signer refused, dissolved before anything was signed: each is asked
   * again at once, alone, so the one the signer will not sign holds no other back.
   */
  private readonly alone = new Set<string>();
  /** Things logged once until they change (a stuck version the cap leaves no room to replace, a refusal). */
  private readonly loggedOnce = new Set<string>();
  /** The fee rate of this round (read at most once a round). */
  private roundRate: FeeRate | undefined;
  /** Whether payouts wait for the rate to fall under PAYOUT_MAX_FEE_RATE_<COIN>. */
  private waitingForFees = false;
  private coverFailures = new FailureStreak(5 * 60_000);

  constructor(private readonly options: UtxoProcessorOptions) {
    super(options);
  }

  /** Esplora or the signer unreachable: every batch would fail alike, so the round fails. */
  protected autoMaxima(): Readonly<Record<string, string>> {
    return { [this.options.asset]: this.options.autoMax };
  }

  protected isTransportFailure(err: unknown): boolean {
    return err instanceof EsploraUnavailable || signerUnreachable(err);
  }

  private get feeTermsCap(): Omit<FeeTerms, 'rate'> {
    return { cap: this.options.maxFeeRate, dust: this.options.dust };
  }

  /** The treasury (account/1/0) and the account xpub from the signer, once per process. */
  private async setUp(): Promise<Treasury> {
    if (this.treasury) return this.treasury;
    const { network, sql, signer } = this.options;
    const answer = await this.treasuryAnswer(async () => {
      const { address, accountXpub } = await signer.getTreasury({ network });
      return { address, accountXpub };
    });
    if (answer.accountXpub === undefined) throw new Error(`the ${network} treasury stored before has no account xpub; the signer must answer once`);
    const keys = new AccountAddresses(answer.accountXpub, hrpOf(answer.address));
    // The xpub and the address come from the same key, or the change would go where the signer cannot spend.
    if (keys.address(1, 0) !== answer.address.toLowerCase()) throw new Error(`the signer's ${network} treasury address is not account/1/0 of its account xpub`);
    // Without the signer: this round follows what is in flight; the next asks it again.
    if (!answer.fromSigner) return { address: answer.address, keys };
    await saveTreasury(sql, network, answer);
    await recordChangeAddresses(sql, network, (index) => keys.address(1, index));
    this.treasury = { address: answer.address, keys };
    this.logger.info({ treasury: answer.address }, 'treasury address and account key from the signer');
    return this.treasury;
  }

  async round(): Promise<void> {
    this.roundRate = undefined;
    const treasury = await this.setUp();
    await this.takeInDeposits(treasury);
    const tip = await this.options.esplora.tipHeight();
    // One batch that cannot be followed, signed or sent must not stop the others, nor new payouts.
    for (const batch of await openBatches(this.options.sql, this.options.network)) {
      await this.record(batch, tip, treasury).catch((err: unknown) => this.itemFailed('record', `record:${batch.id}`, err, { batchId: batch.id }));
    }
    await this.restoreLostBatches(tip);
    for (const version of await builtVersions(this.options.sql, this.options.network)) {
      await this.sign(version).catch((err: unknown) => this.itemFailed('sign', `sign:${version.id}`, err, { batchId: version.batch_id, versionId: version.id }));
    }
    for (const version of await signedVersions(this.options.sql, this.options.network)) {
      await this.broadcast(version, 're-broadcast').catch((err: unknown) =>
        this.itemFailed('broadcast', `broadcast:${version.id}`, err, { batchId: version.batch_id, txid: version.txid }),
      );
    }
    await this.replaceStuck(treasury);
    // The pause switch stops new batches; what is in flight is still followed to its end.
    if (!(await isPaused(this.options.sql, this.options.network))) await this.pay(treasury);
    await this.updateGauges();
  }

  // ---- 1. deposits ----------------------------------------------------------------------------

  /** Accounted deposits become coins (docs/treasury.md#utxo); the invoice service unreachable delays only new coins. */
  private async takeInDeposits(treasury: Treasury): Promise<void> {
    const { sql, network } = this.options;
    try {
      await this.options.takeInDeposits(async (deposit) => {
        const [chain, txid, vout] = deposit.paymentId.split(':');
        if (chain !== network || !txid || !/^[0-9a-f]{64}$/.test(txid) || !/^\d{1,6}$/.test(vout ?? '')) {
          this.logger.warn({ paymentId: deposit.paymentId }, 'deposit intake: payment id is not chain:txid:vout of this network; not a coin');
          return 0;
        }
        // The coin must be spendable by the key the signer will use for it (account/0/index).
        if (treasury.keys.address(0, deposit.addressIndex) !== deposit.depositAddress.toLowerCase()) {
          this.logger.error({ paymentId: deposit.paymentId, addressIndex: deposit.addressIndex }, 'deposit intake: the deposit address is not account/0/index of the signer\'s key; not a coin (operator attention needed)');
          return 0;
        }
        return insertDepositCoin(sql, { network, paymentId: deposit.paymentId, txid, vout: Number(vout), amount: deposit.amount, address: deposit.depositAddress.toLowerCase(), addressIndex: deposit.addressIndex });
      });
      const failedRounds = this.intakeFailures.recovered();
      if (failedRounds > 0) this.logger.info({ failedRounds }, 'deposit intake recovered');
    } catch (err) {
      if (this.intakeFailures.failed()) {
        this.logger.warn({ err: describe(err), failedRounds: this.intakeFailures.failures }, 'deposit intake failed (invoice service unavailable?); payouts from known coins go on');
      }
    }
  }

  // ---- 2. record ------------------------------------------------------------------------------

  private async record(batch: BatchRow, tip: number, treasury: Treasury): Promise<void> {
    const { esplora } = this.options;
    const all = await batchVersions(this.options.sql, batch.id);
    // Every signed version of an open batch may be the one mined (a replacement, or the original
    // after a reorg), a version marked replaced by an earlier build of this code included.
    const versions = all.filter((v) => v.txid !== null && ['signed', 'broadcast', 'mined', 'replaced'].includes(v.status));
    if (versions.length === 0) return;
    const statuses = new Map<string, TxStatus>();
    for (const version of versions) {
      const status = await esplora.txStatus(version.txid!);
      statuses.set(version.id, status);
      if (status.known && status.confirmed) {
        await this.recordMined(batch, version, status, tip, treasury);
        return;
      }
    }
    await this.notMined(batch, versions, all, statuses, tip);
  }

  private async recordMined(batch: BatchRow, version: VersionRow, status: { height: number; blockHash: string }, tip: number, treasury: Treasury): Promise<void> {
    const { sql, network, confirmations } = this.options;
    const depth = tip - status.height + 1;
    const final = depth >= confirmations;
    const txid = version.txid!;
    await eventTransaction(sql, async (tx) => {
      await tx`
        update utxo_transactions set status = ${final ? 'confirmed' : 'mined'}, block_height = ${status.height}, block_hash = ${status.blockHash},
          mined_at = coalesce(mined_at, now()), broadcast_at = coalesce(broadcast_at, now()), updated_at = now()
        where id = ${version.id}`;
      // The other versions spend the same inputs: none can be mined beside it. Until it is final a
      // reorg may still mine another of them instead, so they are followed on (a version mined
      // earlier is out of the chain now); only at final depth are they replaced for good.
      if (final) {
        await tx`update utxo_transactions set status = 'replaced', updated_at = now() where batch_id = ${batch.id} and id <> ${version.id} and status in ('built', 'signed', 'broadcast', 'mined')`;
      } else {
        await tx`
          update utxo_transactions set status = 'broadcast', block_height = null, block_hash = null, mined_at = null, updated_at = now()
          where batch_id = ${batch.id} and id <> ${version.id} and status = 'mined'`;
      }
      for (const output of await batchPayouts(tx, batch.id)) await this.recordPayout(tx, output, txid, depth, final);
      if (!final) return;
      await tx`update utxo_coins set spent = true, updated_at = now() where batch_id = ${batch.id}`;
      if (version.change_amount !== null && batch.change_index !== null) {
        await tx`
          insert into utxo_coins (network, txid, vout, amount, address, branch, address_index, change_of_batch)
          values (${network}, ${txid}, ${version.change_output_index}, ${version.change_amount}, ${treasury.keys.address(1, batch.change_index)}, 1, ${batch.change_index}, ${batch.id})
          on conflict do nothing`;
      }
      await tx`update utxo_batches set status = 'confirmed', confirmed_txid = ${txid}, updated_at = now() where id = ${batch.id}`;
    });
    if (final) {
      this.logger.info({ batchId: batch.id, txid, block: status.height }, 'batch confirmed: its payouts completed, its change is a coin');
    }
  }

  /**
   * A reorg deeper than the confirmation count can take a batch recorded confirmed off the chain:
   * its payouts read Completed but are unpaid, and its change — a coin in `utxo_coins` — is gone.
   * At every new tip the versions confirmed in the last LOST_SCAN_BLOCKS blocks are looked up; one
   * the chain no longer has mined is an incident (once), and its stored signed bytes are sent again:
   * the same transaction, same inputs and outputs, never a new signature
   * (docs/treasury.md#deep-reorgs). The money stays accounted as it was.
   */
  private async restoreLostBatches(tip: number): Promise<void> {
    const { esplora, sql, network, metrics } = this.options;
    const tipHash = await esplora.tipHash();
    if (tipHash === this.lostScanTip) return;
    for (const version of await confirmedVersionsFrom(sql, network, tip - LOST_SCAN_BLOCKS)) {
      const txid = version.txid!;
      const status = await esplora.txStatus(txid);
      if (status.known && status.confirmed) continue;
      // Another version of the batch (a fee replacement, or the original) mined by the reorg pays
      // the same payees from the same inputs: nobody may pay them again, nothing is sent. The records
      // still name the lost version (the payouts' hashes, the change coin): for an operator to correct.
      const sibling = await this.minedSibling(version);
      // The incident first, once per transaction, whatever the node makes of the bytes.
      const first = !this.restoredLost.has(txid);
      if (first) {
        this.restoredLost.add(txid);
        metrics.lostRebroadcasts.inc({ network });
        if (sibling !== undefined) {
          this.logger.error(
            { txid, batchId: version.batch_id, minedVersion: sibling },
            'INCIDENT: a batch transaction recorded confirmed left the chain and another version of the same batch is mined instead: its payees ARE paid (do not pay them again); the payouts\' transaction hashes and the batch\'s change coin still name the lost version and need an operator',
          );
        } else {
          this.logger.error(
            { txid, batchId: version.batch_id, recordedHeight: version.block_height, inMempool: status.known },
            'INCIDENT: a batch transaction recorded confirmed is no longer in a block (a reorg deeper than the confirmation count); its stored bytes are sent again',
          );
        }
      }
      if (sibling !== undefined) continue;
      const result = await esplora.broadcast(version.raw_transaction!);
      if (!result.accepted && first && !(await esplora.txStatus(txid)).known) {
        // An input spent by another transaction in the new chain, say: the payees are unpaid.
        this.logger.error({ txid, batchId: version.batch_id, refusal: result.reason }, 'INCIDENT: the node refuses the lost batch transaction\'s stored bytes; sent again at every new tip (an operator must pay its payees)');
      }
    }
    this.lostScanTip = tipHash;
  }

  /** The txid of another version of `version`'s batch that is in a block now, if any. */
  private async minedSibling(version: VersionRow): Promise<string | undefined> {
    for (const other of await batchVersions(this.options.sql, version.batch_id)) {
      if (other.id === version.id || other.txid === null) continue;
      const status = await this.options.esplora.txStatus(other.txid);
      if (status.known && status.confirmed) return other.txid;
    }
    return undefined;
  }

  /** A payout of a mined batch: confirmations counted; at the count, completed once with the txid (hold debited). */
  private async recordPayout(tx: EventTransaction, output: BatchPayoutRow, txid: string, depth: number, final: boolean): Promise<void> {
    const locked = await lockPayout(tx, output.payout_id);
    if (!locked) throw new Error(`batch ${output.batch_id} names payout ${output.payout_id}, which does not exist`);
    const { payout } = locked;
    if (stageOf(payout) !== 'Sending' || payout.claimed_by !== this.processorId) {
      this.logger.warn({ payoutId: payout.id, stage: stageOf(payout), claimedBy: payout.claimed_by }, 'payout no longer held by the processor; its batch is recorded only');
      return;
    }
    await tx`update payouts set confirmations = ${Math.min(depth, 1_000_000)}, transaction_hash = ${txid}, updated_at = date_trunc('milliseconds', now()) where id = ${payout.id}`;
    if (!final) return;
    if (!(await recordPayoutTransaction(tx, txid, payout.id, output.output_index))) throw new Error(`output ${output.output_index} of ${txid} already completed another payout`);
    await applyTrigger(tx, { ...payout, transaction_hash: txid }, 'complete', { transactionHash: txid });
    this.logger.info({ payoutId: payout.id, txid, outputIndex: output.output_index }, 'payout completed on chain; hold debited');
  }

  /** No version is mined: one that was left the chain (followed again); the node forgot the newest (sent again); or none can ever be. */
  private async notMined(batch: BatchRow, versions: VersionRow[], all: VersionRow[], statuses: Map<string, TxStatus>, tip: number): Promise<void> {
    const { sql } = this.options;
    const reorged = versions.filter((v) => v.status === 'mined');
    if (reorged.length > 0) {
      await sql.begin(async (tx) => {
        await tx`update utxo_transactions set status = 'broadcast', block_height = null, block_hash = null, mined_at = null, updated_at = now() where id in ${tx(reorged.map((v) => v.id))} and status = 'mined'`;
        await tx`update payouts set confirmations = 0, updated_at = date_trunc('milliseconds', now()) where status = 'Pending' and id in (select payout_id from utxo_batch_payouts where batch_id = ${batch.id})`;
      });
      this.logger.warn({ batchId: batch.id, txids: reorged.map((v) => v.txid) }, 'a mined batch transaction left the chain (reorg); followed again');
    }
    if (versions.some((v) => statuses.get(v.id)?.known)) return;
    if (await this.abandonIfUnminable(batch, all, tip)) return;
    const newest = versions[versions.length - 1]!;
    if (newest.status !== 'signed') await this.broadcast(newest, 're-broadcast');
  }

  /**
   * None of the versions is known to the node: if one of the batch's inputs is spent, at final
   * depth, by a transaction that is not a version of ours, no version can ever be mined. The batch
   * is abandoned: versions failed, that coin spent, the others free again, its payouts rejected
   * (hold released, payout.rejected: the signer signs a payout only with the inputs it first signed
   * it with, so it is never sent from others; the merchant requests again). Counted and alerted.
   */
  private async abandonIfUnminable(batch: BatchRow, versions: VersionRow[], tip: number): Promise<boolean> {
    const { sql, esplora, network, confirmations, metrics } = this.options;
    // Every version the batch ever had, whatever its status: a spend by any of them is ours.
    const ours = new Set(versions.flatMap((v) => (v.txid === null ? [] : [v.txid])));
    const coins = await batchCoins(sql, batch.id);
    let spentElsewhere: { coin: CoinRow; by: string } | undefined;
    for (const coin of coins) {
      const spend = await esplora.outspend(coin.txid, coin.vout);
      if (spend.spent && !ours.has(spend.txid) && spend.confirmed && spend.height !== undefined && tip - spend.height + 1 >= confirmations) {
        spentElsewhere = { coin, by: spend.txid };
        break;
      }
    }
    if (!spentElsewhere) return false;
    const reason = `input ${spentElsewhere.coin.txid}:${spentElsewhere.coin.vout} was spent by ${spentElsewhere.by}, a transaction the processor did not make; no version of the batch can ever be mined`;
    await eventTransaction(sql, async (tx) => {
      await tx`update utxo_transactions set status = 'failed', failure_reason = ${reason}, updated_at = now() where batch_id = ${batch.id} and status in ('built', 'signed', 'broadcast', 'mined')`;
      await tx`update utxo_coins set spent = true, updated_at = now() where id = ${spentElsewhere.coin.id}`;
      await tx`update utxo_coins set batch_id = null, updated_at = now() where batch_id = ${batch.id} and id <> ${spentElsewhere.coin.id}`;
      await tx`update utxo_batches set status = 'abandoned', failure_reason = ${reason}, updated_at = now() where id = ${batch.id}`;
      for (const output of await batchPayouts(tx, batch.id)) {
        const locked = await lockPayout(tx, output.payout_id);
        if (locked && stageOf(locked.payout) === 'Sending' && locked.payout.claimed_by === this.processorId) {
          await applyTrigger(tx, locked.payout, 'reject', { adminNote: `the ${locked.payout.currency} payout was never sent: ${reason}; nothing was paid, request the payout again` });
        }
      }
    });
    metrics.batchesAbandoned.inc({ network });
    this.logger.error({ batchId: batch.id, reason }, 'a batch can never be mined (an input spent elsewhere); its payouts rejected (operator attention needed)');
    return true;
  }

  // ---- 3. sign --------------------------------------------------------------------------------

  /**
   * Asks the signer for a built version, with its stored PSBT (the same request after a kill: the
   * signatures are deterministic, so the same txid), and stores the signed bytes and txid before
   * broadcasting them. A refusal (PermissionDenied) leaves the version built, asked again later.
   */
  private async sign(version: VersionRow): Promise<void> {
    const { sql, network, signer, metrics } = this.options;
    if ((this.refused.get(version.id) ?? 0) > Date.now()) return;
    const [batch] = await sql<BatchRow[]>`select * from utxo_batches where id = ${version.batch_id}`;
    if (!batch || batch.status !== 'open') return;
    const unsigned = Transaction.fromPSBT(Buffer.from(version.psbt, 'base64'));
    const coins = new Map((await batchCoins(sql, batch.id)).map((c) => [`${c.txid}:${c.vout}`, c]));
    const inputKeys = Array.from({ length: unsigned.inputsLength }, (_, i) => {
      const input = unsigned.getInput(i);
      const coin = coins.get(`${Buffer.from(input.txid!).toString('hex')}:${input.index}`);
      if (!coin) throw new Error(`version ${version.id} spends an output that is not a coin of its batch`);
      return { branch: coin.branch as KeyBranch, index: coin.address_index };
    });
    const payouts = (await batchPayouts(sql, batch.id)).map((p) => ({ payoutId: p.payout_id, outputIndex: p.output_index }));
    let answer;
    try {
      answer = await signer.signUtxoTransaction({
        network,
        psbt: version.psbt,
        inputKeys,
        payouts,
        ...(version.change_output_index === null ? {} : { changeOutputIndex: version.change_output_index }),
        changeAddressIndex: batch.change_index ?? 0,
      });
    } catch (err) {
      const refusal = ConnectError.from(err);
      if (refusal.code !== Code.PermissionDenied) throw err;
      metrics.signerRefusals.inc({ network, purpose: 'payout' });
      // A refusal that says the signer signed these payouts before (an answer lost to a crash) must
      // not dissolve the batch: the signature exists, and only these inputs may ever pay them.
      const bound = ['inputs_mismatch', 'fee_not_higher', 'input_amount_mismatch'].includes(errorFacts(err).code);
      if (!bound && (await this.dissolveRefused(batch, payouts.map((p) => p.payoutId), refusal.rawMessage))) return;
      this.refused.set(version.id, Date.now() + REFUSAL_BACKOFF_MS);
      this.logger.error({ batchId: batch.id, versionId: version.id, refusal: refusal.rawMessage }, 'the signer refused to sign a batch; asked again later with the same PSBT');
      return;
    }
    // A segwit txid does not cover the witnesses: the signed transaction's must be the PSBT's own.
    const signed = Transaction.fromRaw(Buffer.from(answer.rawTransaction, 'hex'));
    if (signed.id !== unsigned.id || answer.txid !== unsigned.id) throw new Error(`the signer answered transaction ${answer.txid}, not the PSBT's ${unsigned.id}`);
    const stored = await eventTransaction(sql, async (tx) => {
      const [row] = await tx<VersionRow[]>`
        update utxo_transactions set status = 'signed', txid = ${signed.id}, raw_transaction = ${answer.rawTransaction}, vsize = ${signed.vsize}, updated_at = now()
        where id = ${version.id} and status = 'built'
        returning *`;
      if (!row) return undefined;
      await tx`
        update payouts set transaction_hash = ${signed.id}, confirmations = 0, signer_refusal = null, signer_refused_at = null, updated_at = date_trunc('milliseconds', now())
        where status = 'Pending' and claimed_by = ${this.processorId} and id in (select payout_id from utxo_batch_payouts where batch_id = ${batch.id})`;
      return row;
    });
    if (!stored) return;
    this.logger.info({ batchId: batch.id, txid: signed.id, payouts: payouts.length, fee: version.fee, vsize: signed.vsize, replaces: version.replaces }, 'batch transaction signed and stored');
    await this.broadcast(stored, 'broadcast');
  }

  // ---- 4. broadcast ---------------------------------------------------------------------------

  /** `POST /tx` with the stored bytes; a node that refuses them but knows the txid counts as accepted. */
  private async broadcast(version: VersionRow, why: 'broadcast' | 're-broadcast'): Promise<boolean> {
    const { esplora, sql, network, metrics } = this.options;
    const result = await esplora.broadcast(version.raw_transaction!);
    if (result.accepted && result.txid !== version.txid) throw new Error(`the node reports txid ${result.txid} for stored transaction ${version.txid}`);
    if (!result.accepted && !(await esplora.txStatus(version.txid!)).known) {
      const key = `refused:${version.id}:${result.reason}`;
      if (!this.loggedOnce.has(key)) {
        this.loggedOnce.add(key);
        this.logger.warn({ txid: version.txid, batchId: version.batch_id, refusal: result.reason }, 'the node refused a stored batch transaction; it is sent again next round');
      }
      return false;
    }
    if (version.status === 'signed' && (await markVersionBroadcast(sql, version.id))) metrics.broadcast.inc({ network, purpose: 'payout' });
    this.logger.info({ txid: version.txid, batchId: version.batch_id }, why === 'broadcast' ? 'batch transaction broadcast' : 'stored batch transaction broadcast again');
    return true;
  }

  /**
   * A batch the signer refused before it ever signed a version of it (no version has a txid) is
   * dissolved (docs/treasury.md#signer-refusals): the signer bound nothing, no transaction exists,
   * so its payouts are unclaimed with the refusal recorded on each (the Treasury page lists them),
   * its coins freed, the batch abandoned. Each payout is then asked alone — at once if the refused
   * batch held others, after REFUSAL_BACKOFF_MS if it was alone — so a payout above the signer's
   * limits never holds another back, and the one refused stays visible until an operator rejects
   * it or raises the limit. A batch with a signed version keeps its inputs: it is asked again.
   */
  private async dissolveRefused(batch: BatchRow, payoutIds: string[], refusal: string): Promise<boolean> {
    const { sql, network } = this.options;
    const reason = `the signer refused the batch before signing any version of it: ${refusal}`.slice(0, 500);
    const dissolved = await eventTransaction(sql, async (tx) => {
      const [locked] = await tx<BatchRow[]>`select * from utxo_batches where id = ${batch.id} and status = 'open' for update`;
      if (!locked) return false;
      const [signed] = await tx`select 1 from utxo_transactions where batch_id = ${batch.id} and txid is not null limit 1`;
      if (signed) return false;
      await tx`update utxo_transactions set status = 'failed', failure_reason = ${reason}, updated_at = now() where batch_id = ${batch.id} and status = 'built'`;
      await tx`update utxo_coins set batch_id = null, updated_at = now() where batch_id = ${batch.id}`;
      await tx`delete from utxo_batch_payouts where batch_id = ${batch.id}`;
      for (const payoutId of payoutIds) {
        const held = await lockPayout(tx, payoutId);
        if (!held || stageOf(held.payout) !== 'Sending' || held.payout.claimed_by !== this.processorId) continue;
        await applyTrigger(tx, held.payout, 'unclaim');
        await recordSignerRefusal(tx, payoutId, refusal);
      }
      await tx`update utxo_batches set status = 'abandoned', failure_reason = ${`${reason} (payouts ${payoutIds.join(', ')})`.slice(0, 1000)}, updated_at = now() where id = ${batch.id}`;
      if (locked.change_index !== null) await freeChangeIndex(tx, network, locked.change_index);
      return true;
    });
    if (!dissolved) return false;
    for (const id of payoutIds) {
      if (payoutIds.length > 1) this.alone.add(id);
      else this.alone.delete(id);
    }
    this.logger.error(
      { batchId: batch.id, network, payouts: payoutIds, refusal },
      payoutIds.length > 1
        ? 'the signer refused a batch: dissolved (nothing was signed); each of its payouts is asked again alone'
        : 'the signer refused a payout: unclaimed with the refusal recorded (Treasury page); asked again later',
    );
    return true;
  }

  // ---- 5. replace -----------------------------------------------------------------------------

  /** The rate of this round for PAYOUT_CONFIRM_TARGET, read once; the fee-cap gauge follows it. */
  private async rate(): Promise<{ rate: FeeRate; capped: boolean }> {
    const { esplora, network, metrics, maxFeeRate, confirmTarget } = this.options;
    this.roundRate ??= rateForTarget(await esplora.feeEstimates(), confirmTarget);
    if (this.roundRate === undefined) throw new EsploraUnavailable('/fee-estimates lists no target');
    const capped = this.roundRate > maxFeeRate;
    if (capped !== this.waitingForFees) {
      this.waitingForFees = capped;
      metrics.feeCapWaiting.set({ network }, capped ? 1 : 0);
      if (capped) this.logger.warn({ rate: formatFeeRate(this.roundRate), cap: formatFeeRate(maxFeeRate) }, 'the fee rate is above PAYOUT_MAX_FEE_RATE; payouts wait for it to fall');
      else this.logger.info({ rate: formatFeeRate(this.roundRate), cap: formatFeeRate(maxFeeRate) }, 'the fee rate is within PAYOUT_MAX_FEE_RATE again; payouts go');
    }
    return { rate: this.roundRate, capped };
  }

  private async replaceStuck(treasury: Treasury): Promise<void> {
    const { sql, network, replaceAfterMs, metrics } = this.options;
    const stuck = await stuckVersions(sql, network, replaceAfterMs);
    if (stuck.length === 0) return;
    const { rate } = await this.rate();
    for (const old of stuck) {
      const [batch] = await sql<BatchRow[]>`select * from utxo_batches where id = ${old.batch_id}`;
      const payouts = await batchPayouts(sql, old.batch_id);
      const coins = await batchCoins(sql, old.batch_id);
      const outputs = payouts.map((p) => ({ payoutId: p.payout_id, amount: BigInt(p.amount), scriptLength: P2WPKH_SCRIPT_BYTES }));
      const next = replacementPlan(
        { inputTotal: coins.reduce((s, c) => s + BigInt(c.amount), 0n), payouts: outputs, inputs: coins.length, change: old.change_amount === null ? null : BigInt(old.change_amount), fee: BigInt(old.fee) },
        { rate, ...this.feeTermsCap },
      );
      if (!next || !batch) {
        if (!this.loggedOnce.has(`unreplaceable:${old.id}`)) {
          this.loggedOnce.add(`unreplaceable:${old.id}`);
          this.logger.warn({ txid: old.txid, fee: old.fee, rate: formatFeeRate(rate) }, 'a stuck batch transaction cannot be replaced within PAYOUT_MAX_FEE_RATE (or has no change to pay a higher fee); it waits to be mined as it is');
        }
        continue;
      }
      // The same inputs in the same order (read from the old PSBT) and the same payout outputs.
      const oldTx = Transaction.fromPSBT(Buffer.from(old.psbt, 'base64'));
      const byOutpoint = new Map(coins.map((c) => [`${c.txid}:${c.vout}`, c]));
      const inputs = Array.from({ length: oldTx.inputsLength }, (_, i) => {
        const input = oldTx.getInput(i);
        const coin = byOutpoint.get(`${Buffer.from(input.txid!).toString('hex')}:${input.index}`)!;
        return { txid: coin.txid, vout: coin.vout, amount: BigInt(coin.amount), address: coin.address };
      });
      const changeOutput = next.change === null ? [] : [{ address: treasury.keys.address(1, batch.change_index!), amount: next.change }];
      const psbt = buildPsbt(inputs, [...payouts.map((p) => ({ address: p.address, amount: BigInt(p.amount) })), ...changeOutput]);
      const [built] = await sql<VersionRow[]>`
        insert into utxo_transactions (batch_id, network, psbt, fee, fee_rate, change_amount, change_output_index, replaces)
        values (${old.batch_id}, ${network}, ${psbt}, ${next.fee.toString()}, ${rate.toString()}, ${next.change?.toString() ?? null},
                ${next.change === null ? null : payouts.length}, ${old.id})
        returning *`;
      metrics.replaced.inc({ network, purpose: 'payout' });
      this.logger.info({ batchId: old.batch_id, replacedTxid: old.txid, oldFee: old.fee, fee: next.fee.toString() }, 'stuck batch transaction replaced: same inputs, higher fee (BIP125)');
      await this.sign(built!);
    }
  }

  // ---- 6. pay ---------------------------------------------------------------------------------

  private async pay(treasury: Treasury): Promise<void> {
    const { sql, network, asset, batchMax, batchWaitMs } = this.options;
    // A payout the signer refused waits REFUSAL_BACKOFF_MS, unless it was refused only as part of a
    // batch (this.alone): then it goes at once, alone, as does every payout once refused.
    const waiting = await sql<(PayoutRow & { waited_ms: number })[]>`
      select p.*, (extract(epoch from now() - greatest(p.verified_at, coalesce(p.approved_at, p.verified_at))) * 1000)::float8 as waited_ms
      from payouts p
      where ${claimablePayouts(sql, network, { [asset]: this.options.autoMax })}
        and not exists (select 1 from utxo_batch_payouts b where b.payout_id = p.id)
        and (p.signer_refused_at is null or p.signer_refused_at < now() - ${REFUSAL_BACKOFF_MS}::int * interval '1 millisecond'
             or p.id = any(${[...this.alone]}::uuid[]))
      order by (p.signer_refusal is not null) desc, greatest(p.verified_at, coalesce(p.approved_at, p.verified_at)), p.id
      limit ${PAYOUTS_CONSIDERED_PER_ROUND}`;
    if (waiting.length === 0) return;
    const refusedBefore = waiting[0]!.signer_refusal !== null;
    const candidates = refusedBefore ? waiting.slice(0, 1) : waiting;
    // A batch goes when full, or when its oldest payout has waited PAYOUT_BATCH_WAIT since it became claimable.
    if (!refusedBefore && candidates.length < batchMax && Math.max(...candidates.map((c) => c.waited_ms)) < batchWaitMs) return;
    // Oldest first, up to a batch: those the coins cannot pay now are passed over, and looked at
    // first again next round (docs/treasury.md#payouts-that-cannot-go-yet).
    const { rate, capped } = await this.rate();
    if (capped) return;
    const decimals = storedMethod(asset, network).baseUnitDecimals;
    const outputs: PayoutOutput[] = candidates.map((p) => ({ payoutId: p.id, amount: toBaseUnits(new Decimal(p.amount), decimals), scriptLength: P2WPKH_SCRIPT_BYTES }));
    const coins = await availableCoins(sql, network);
    const plan = planBatch(coins.map((c) => ({ ...c, amount: BigInt(c.amount) })), outputs, { rate, ...this.feeTermsCap }, { maxPayouts: batchMax });
    if (!plan) {
      if (this.coverFailures.failed()) this.logger.warn({ payouts: candidates.length, coins: coins.length }, 'the treasury\'s coins cannot pay any waiting payout at this fee rate within PAYOUT_MAX_FEE_RATE now; they wait (deposits become coins as they are accounted)');
      return;
    }
    this.coverFailures.recovered();
    const byId = new Map(candidates.map((c) => [c.id, c]));
    const built = await eventTransaction(sql, async (tx) => {
      const locked: PayoutRow[] = [];
      for (const output of plan.payouts) {
        const chosen = byId.get(output.payoutId)!;
        const [row] = await tx<PayoutRow[]>`select * from payouts where id = ${output.payoutId} and status = 'Pending' and claimed_at is null for update skip locked`;
        // A cancel or an operator's claim since the selection wins: the batch is built next round without it.
        if (!row || row.amount !== chosen.amount || row.address !== chosen.address || row.currency !== chosen.currency) return undefined;
        locked.push(row);
      }
      const spent = await lockAvailableCoins(tx, network, plan.inputs.map((c) => c.id));
      if (!spent) return undefined;
      const changeIndex = plan.change === null ? null : await takeChangeIndex(tx, network);
      // The change address recorded with its index: from now on no payout may pay it (docs/treasury.md#house-addresses).
      const changeAddress = changeIndex === null ? null : treasury.keys.address(1, changeIndex);
      const [batch] = await tx<BatchRow[]>`
        insert into utxo_batches (network, change_index, change_address) values (${network}, ${changeIndex}, ${changeAddress}) returning *`;
      for (const [i, payout] of locked.entries()) {
        await tx`insert into utxo_batch_payouts (batch_id, payout_id, output_index, address, amount) values (${batch!.id}, ${payout.id}, ${i}, ${payout.address}, ${plan.payouts[i]!.amount.toString()})`;
        await applyTrigger(tx, payout, 'claim', { claimedBy: this.processorId });
      }
      await tx`update utxo_coins set batch_id = ${batch!.id}, updated_at = now() where id in ${tx(plan.inputs.map((c) => c.id))}`;
      const changeOutput = changeAddress === null ? [] : [{ address: changeAddress, amount: plan.change! }];
      const psbt = buildPsbt(
        plan.inputs.map((c) => ({ txid: c.txid, vout: c.vout, amount: c.amount, address: c.address })),
        [...locked.map((p, i) => ({ address: p.address, amount: plan.payouts[i]!.amount })), ...changeOutput],
      );
      const [version] = await tx<VersionRow[]>`
        insert into utxo_transactions (batch_id, network, psbt, fee, fee_rate, change_amount, change_output_index)
        values (${batch!.id}, ${network}, ${psbt}, ${plan.fee.toString()}, ${rate.toString()}, ${plan.change?.toString() ?? null}, ${changeIndex === null ? null : locked.length})
        returning *`;
      return version!;
    });
    if (!built) return;
    for (const output of plan.payouts) this.alone.delete(output.payoutId);
    this.logger.info(
      { batchId: built.batch_id, payouts: plan.payouts.length, inputs: plan.inputs.length, fee: plan.fee.toString(), rate: formatFeeRate(rate), change: plan.change?.toString() ?? null, waiting: candidates.length - plan.payouts.length },
      'batch built: payouts claimed, coins reserved, unsigned PSBT stored',
    );
    await this.sign(built);
  }

  // ---- metrics --------------------------------------------------------------------------------

  private async updateGauges(): Promise<void> {
    const { sql, network, asset, metrics, stuckAfterMs } = this.options;
    const balance = await availableBalance(sql, network);
    const [inFlight] = await sql<{ count: number; oldest: number | null; stuck: number }[]>`
      select count(*)::int as count, extract(epoch from now() - min(claimed_at))::float8 as oldest,
        count(*) filter (where claimed_at < now() - ${stuckAfterMs}::int * interval '1 millisecond')::int as stuck
      from payouts where status = 'Pending' and claimed_by = ${this.processorId}`;
    metrics.treasuryBalance.set({ network, asset }, Number(balance));
    metrics.payoutsInFlight.set({ network }, inFlight?.count ?? 0);
    metrics.oldestInFlightSeconds.set({ network }, inFlight?.oldest ?? 0);
    metrics.payoutsStuck.set({ network }, inFlight?.stuck ?? 0);
    metrics.feeCapWaiting.set({ network }, this.waitingForFees ? 1 : 0);
  }
}
