/**
 * SignUtxoTransaction and GetTreasury for Bitcoin and Litecoin (docs/treasury.md#utxo-signer-policy):
 * the processor's unsigned PSBT is checked against the signer's own keys and the payouts as
 * payout.payouts holds them, signed (P2WPKH, SIGHASH_ALL, deterministic), finalized and answered
 * as the raw transaction. The checks, the counters (daily totals, daily fees, the input set each
 * payout is bound to) and the audit row share one Postgres transaction, as the EVM payouts do.
 */
import { Decimal, toBaseUnits } from '@coinvoice/domain/money';
import { serviceError, type Logger, type Sql } from '@coinvoice/runtime';
import type { SignUtxoTransactionRequest } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { Transaction } from '@scure/btc-signer';
import { withinCap, formatFeeRate, type UtxoTreasuryCoin } from '../domain/fee-rate';
import { Refusal } from './policy';
import type { AutoMaxima } from './settings';
import type { SignerMetrics } from './metrics';
import { addToDailyTotal, findSignablePayout, lockDailyTotal } from './store';
import { UTXO_NETWORK_COINS, type UtxoCoinLimits } from './utxo-settings';
import { outputScriptOfAddress, type UtxoKeyPath, type UtxoSigningKeys, type UtxoTreasuryNetwork } from './utxo-signing-keys';
import { addToUtxoDailyFees, appendUtxoAudit, boundInputAmounts, findUtxoPayoutSignatures, lockUtxoDailyFees, recordUtxoPayoutSignature, type UtxoAuditEntry } from './utxo-store';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
/** Non-hardened BIP32 indexes. */
const MAX_KEY_INDEX = 2 ** 31 - 1;
/** BIP125: an input with a sequence at most this signals that its transaction may be replaced. */
const MAX_REPLACEABLE_SEQUENCE = 0xfffffffd;
/** BTC and LTC amounts have 8 decimals (satoshi, litoshi). */
const COIN_DECIMALS = 8;

export function isUtxoTreasuryNetwork(network: string): network is UtxoTreasuryNetwork {
  return network === 'bitcoin' || network === 'litecoin';
}

/** "txid:vout", the form an input set is compared and stored in. */
function outpointOf(txid: Uint8Array, vout: number): string {
  return `${Buffer.from(txid).toString('hex')}:${vout}`;
}

function sameBytes(a: Uint8Array | undefined, b: Uint8Array): boolean {
  return a !== undefined && Buffer.from(a).equals(Buffer.from(b));
}

/** What the request's PSBT is, once its inputs, change and outputs passed the checks that need no database. */
interface CheckedTransaction {
  tx: Transaction;
  txid: string;
  inputKeys: UtxoKeyPath[];
  /** Sorted outpoints. */
  inputs: string[];
  /** The amount the PSBT says each of `inputs` holds (its witness_utxo), in the same order. */
  inputAmounts: bigint[];
  fee: bigint;
  /** Payout id → its output's script and value. */
  payoutOutputs: Map<string, { script: Uint8Array; value: bigint; outputIndex: number }>;
}

export class UtxoSigner {
  constructor(
    private readonly options: {
      sql: Sql;
      keys: Readonly<Record<UtxoTreasuryNetwork, UtxoSigningKeys>>;
      limits: Readonly<Record<UtxoTreasuryCoin, UtxoCoinLimits>>;
      /** PAYOUT_AUTO_MAX_<COIN>: above it, a payout is signed once approved. */
      autoMax: AutoMaxima;
      metrics: SignerMetrics;
      logger: Logger;
      caller: string;
    },
  ) {}

  /** GetTreasury: account/1/0 and the account xpub (BIP32 mainnet versions, "xpub…"). */
  treasury(network: UtxoTreasuryNetwork) {
    const keys = this.options.keys[network];
    return { network, address: keys.treasuryAddress, accountXpub: keys.accountXpub };
  }

  async sign(request: SignUtxoTransactionRequest) {
    const audit: UtxoAuditEntry = {
      outcome: 'refused',
      caller: this.options.caller,
      network: request.network.slice(0, 32),
      payoutIds: request.payouts.map((p) => p.payoutId).filter((id) => UUID.test(id)).map((id) => id.toLowerCase()),
      asset: null,
      amount: null,
      fee: null,
      inputs: null,
      txid: null,
      rule: null,
      reason: null,
    };
    try {
      if (!isUtxoTreasuryNetwork(request.network)) throw new Refusal('network_not_supported', `network ${request.network} is not signed as a UTXO chain (bitcoin, litecoin)`);
      const network = request.network;
      const coin = UTXO_NETWORK_COINS[network];
      audit.asset = coin;
      const checked = this.checkTransaction(network, request);
      audit.inputs = checked.inputs;
      audit.fee = checked.fee;
      audit.txid = checked.txid;
      return await this.signChecked(network, coin, checked, audit);
    } catch (err) {
      if (!(err instanceof Refusal)) throw err;
      this.options.metrics.refusals.labels(err.rule).inc();
      this.options.logger.warn({ rule: err.rule, reason: err.message, network: audit.network, payoutIds: audit.payoutIds, caller: audit.caller }, 'signer refused a request');
      await appendUtxoAudit(this.options.sql, { ...audit, outcome: 'refused', rule: err.rule, reason: err.message });
      throw serviceError(err.connectCode, err.rule, err.message);
    }
  }

  /** The rules that read the request only: inputs ours and described, outputs payouts or change, a positive fee. */
  private checkTransaction(network: UtxoTreasuryNetwork, request: SignUtxoTransactionRequest): CheckedTransaction {
    const keys = this.options.keys[network];
    if (!BASE64.test(request.psbt)) throw new Refusal('invalid_request', 'psbt must be a base64 PSBT');
    const bytes = Buffer.from(request.psbt, 'base64');
    let tx: Transaction;
    try {
      // BIP174 version 0 only: its global unsigned transaction is what is signed.
      tx = Transaction.fromPSBT(bytes);
    } catch (err) {
      throw new Refusal('invalid_request', `psbt is not a valid PSBT (${err instanceof Error ? err.message : 'unreadable'})`);
    }
    if (!bytes.subarray(0, 5).equals(Buffer.from('psbt\xff', 'latin1')) || tx.opts.PSBTVersion !== undefined && tx.opts.PSBTVersion !== 0) {
      throw new Refusal('invalid_request', 'psbt must be a BIP174 version 0 PSBT');
    }
    if (tx.inputsLength === 0 || tx.outputsLength === 0) throw new Refusal('invalid_request', 'the transaction needs inputs and outputs');
    if (request.inputKeys.length !== tx.inputsLength) {
      throw new Refusal('invalid_request', `input_keys has ${request.inputKeys.length} keys for ${tx.inputsLength} inputs (one per input, in order)`);
    }
    const inputKeys: UtxoKeyPath[] = [];
    const outpoints = new Map<string, bigint>();
    let inputTotal = 0n;
    for (let i = 0; i < tx.inputsLength; i++) {
      const input = tx.getInput(i);
      const key = request.inputKeys[i]!;
      if ((key.branch !== 0 && key.branch !== 1) || key.index > MAX_KEY_INDEX) {
        throw new Refusal('input_not_ours', `input ${i}: key account/${key.branch}/${key.index} is not a receive (0) or change (1) key below 2^31`);
      }
      const path: UtxoKeyPath = { branch: key.branch, index: key.index };
      if (!input.witnessUtxo) throw new Refusal('input_not_ours', `input ${i} has no witness_utxo: the signer signs only outputs it is shown`);
      if (!sameBytes(input.witnessUtxo.script, keys.script(path))) {
        throw new Refusal('input_not_ours', `input ${i} spends a script that is not the P2WPKH output of account/${path.branch}/${path.index}`);
      }
      if (input.partialSig?.length || input.finalScriptWitness || input.finalScriptSig || input.nonWitnessUtxo || input.redeemScript || input.witnessScript) {
        throw new Refusal('invalid_request', `input ${i} carries signatures or scripts: the signer takes an unsigned P2WPKH input`);
      }
      if (input.sighashType !== undefined && input.sighashType !== 1) throw new Refusal('invalid_request', `input ${i} asks for a sighash type other than SIGHASH_ALL`);
      if ((input.sequence ?? 0xffffffff) > MAX_REPLACEABLE_SEQUENCE) {
        throw new Refusal('not_replaceable', `input ${i} does not signal replaceability (sequence ${input.sequence} > 0xfffffffd, BIP125)`);
      }
      const outpoint = outpointOf(input.txid!, input.index!);
      if (outpoints.has(outpoint)) throw new Refusal('duplicate_input', `input ${i} spends ${outpoint} twice`);
      outpoints.set(outpoint, input.witnessUtxo.amount);
      inputTotal += input.witnessUtxo.amount;
      inputKeys.push(path);
    }

    const paidBy = new Map<number, string>();
    const payoutOutputs = new Map<string, { script: Uint8Array; value: bigint; outputIndex: number }>();
    if (request.payouts.length === 0) throw new Refusal('invalid_request', 'payouts is empty: the signer signs payouts only');
    for (const payout of request.payouts) {
      if (!UUID.test(payout.payoutId)) throw new Refusal('invalid_request', 'payouts[].payout_id must be a UUID');
      const id = payout.payoutId.toLowerCase();
      if (payoutOutputs.has(id)) throw new Refusal('invalid_request', `payout ${id} is listed twice`);
      if (payout.outputIndex >= tx.outputsLength || paidBy.has(payout.outputIndex) || payout.outputIndex === request.changeOutputIndex) {
        throw new Refusal('invalid_request', `payout ${id}'s output_index ${payout.outputIndex} is out of range, the change, or another payout's`);
      }
      const output = tx.getOutput(payout.outputIndex);
      paidBy.set(payout.outputIndex, id);
      payoutOutputs.set(id, { script: output.script!, value: output.amount!, outputIndex: payout.outputIndex });
    }
    if (request.changeOutputIndex !== undefined) {
      if (request.changeOutputIndex >= tx.outputsLength) throw new Refusal('invalid_request', `change_output_index ${request.changeOutputIndex} is out of range`);
      if (request.changeAddressIndex > MAX_KEY_INDEX) throw new Refusal('invalid_request', 'change_address_index must be below 2^31');
      const change = tx.getOutput(request.changeOutputIndex);
      if (!sameBytes(change.script, keys.script({ branch: 1, index: request.changeAddressIndex }))) {
        throw new Refusal('change_mismatch', `output ${request.changeOutputIndex} is not the P2WPKH output of the change key account/1/${request.changeAddressIndex}`);
      }
    }
    let outputTotal = 0n;
    for (let o = 0; o < tx.outputsLength; o++) {
      if (o !== request.changeOutputIndex && !paidBy.has(o)) throw new Refusal('output_not_allowed', `output ${o} pays neither a listed payout nor the change`);
      outputTotal += tx.getOutput(o).amount!;
    }
    const fee = inputTotal - outputTotal;
    if (fee <= 0n) throw new Refusal('fee_not_positive', `inputs ${inputTotal} − outputs ${outputTotal} = ${fee}: the fee must be positive`);
    const inputs = [...outpoints.keys()].sort();
    return { tx, txid: tx.id, inputKeys, inputs, inputAmounts: inputs.map((o) => outpoints.get(o)!), fee, payoutOutputs };
  }

  private async signChecked(network: UtxoTreasuryNetwork, coin: UtxoTreasuryCoin, checked: CheckedTransaction, audit: UtxoAuditEntry) {
    const { sql, limits, keys } = this.options;
    const limit = limits[coin];
    // Payouts in a fixed order, so concurrent requests lock their rows in the same order.
    const payoutIds = [...checked.payoutOutputs.keys()].sort();
    const answer = await sql.begin(async (db) => {
      const amounts = new Map<string, bigint>();
      for (const payoutId of payoutIds) {
        const payout = (await findSignablePayout(db, payoutId, this.options.autoMax)).check();
        if (payout.currency !== coin) throw new Refusal('asset_not_supported', `payout ${payoutId} is in ${payout.currency}, not ${coin}`);
        if (payout.network !== network) throw new Refusal('network_not_supported', `payout ${payoutId} is sent on ${payout.network}, not ${network}`);
        const amount = toBaseUnits(new Decimal(payout.amount), COIN_DECIMALS);
        const output = checked.payoutOutputs.get(payoutId)!;
        const script = outputScriptOfAddress(network, payout.address);
        if (!script) throw new Refusal('payout_not_signable', `payout ${payoutId}'s address is not a ${network} address`);
        if (!sameBytes(output.script, script)) throw new Refusal('destination_mismatch', `output ${output.outputIndex} does not pay payout ${payoutId}'s address`);
        if (output.value !== amount) throw new Refusal('amount_mismatch', `output ${output.outputIndex} pays ${output.value} base units, not payout ${payoutId}'s ${amount}`);
        if (amount > limit.maxPayout) throw new Refusal('amount_above_limit', `${amount} base units of ${coin} exceed SIGNER_MAX_PAYOUT_${coin} (${limit.maxPayout})`);
        amounts.set(payoutId, amount);
      }
      audit.amount = [...amounts.values()].reduce((a, b) => a + b, 0n);
      // The coin's daily row first: every UTXO payout signature of the coin queues behind it.
      const daily = await lockDailyTotal(db, coin);
      // A segwit v0 signature commits to its own input's amount only: a request saying other amounts
      // than an earlier one could pair its signatures with the earlier's into a transaction whose real
      // fee neither showed. So each outpoint keeps the amount said at its first signature, whichever
      // payouts a request lists (docs/treasury.md#utxo-signer-policy).
      const saidOfInputs = await boundInputAmounts(db, checked.inputs);
      checked.inputs.forEach((outpoint, i) => {
        const said = saidOfInputs.get(outpoint);
        if (said && said.amount !== checked.inputAmounts[i]) {
          throw new Refusal('input_amount_mismatch', `input ${outpoint} was signed (payout ${said.payoutId}) as holding ${said.amount} base units; this request says ${checked.inputAmounts[i]}`);
        }
      });
      const earlier = await findUtxoPayoutSignatures(db, payoutIds);
      let highestEarlierFee = 0n;
      for (const signature of earlier) {
        if (signature.inputs.join(',') !== checked.inputs.join(',')) {
          throw new Refusal(
            'inputs_mismatch',
            `payout ${signature.payoutId} was signed spending ${signature.inputs.join(', ')}; only a replacement spending exactly those inputs may pay it again`,
          );
        }
        if (signature.txid !== checked.txid && checked.fee <= signature.fee) {
          throw new Refusal('fee_not_higher', `a replacement paying payout ${signature.payoutId} must pay more than the ${signature.fee} base units already signed, not ${checked.fee}`);
        }
        if (signature.fee > highestEarlierFee) highestEarlierFee = signature.fee;
      }
      const bound = new Set(earlier.map((s) => s.payoutId));
      const added = payoutIds.filter((id) => !bound.has(id)).reduce((sum, id) => sum + amounts.get(id)!, 0n);
      if (daily.amount + added > limit.dailyLimit) {
        throw new Refusal('daily_limit_exceeded', `${coin} signed today (UTC) ${daily.amount} + these ${added} base units exceed SIGNER_DAILY_LIMIT_${coin} (${limit.dailyLimit})`);
      }

      keys[network].signAll(checked.tx, checked.inputKeys);
      const vsize = checked.tx.vsize;
      if (!withinCap(checked.fee, vsize, limit.maxFeeRate)) {
        throw new Refusal('fee_rate_above_cap', `a fee of ${checked.fee} for ${vsize} vB exceeds PAYOUT_MAX_FEE_RATE_${coin} (${formatFeeRate(limit.maxFeeRate)})`);
      }
      // Only one version over the same inputs can be mined: a replacement costs what it adds.
      const feeCharge = checked.fee > highestEarlierFee ? checked.fee - highestEarlierFee : 0n;
      const fees = await lockUtxoDailyFees(db, coin);
      if (fees.fee + feeCharge > limit.dailyFeeLimit) {
        throw new Refusal('daily_fee_budget_exceeded', `${coin} fees signed today (UTC) ${fees.fee} + this ${feeCharge} base units exceed SIGNER_DAILY_FEE_LIMIT_${coin} (${limit.dailyFeeLimit})`);
      }
      if (added > 0n) await addToDailyTotal(db, coin, daily.day, added);
      await addToUtxoDailyFees(db, coin, fees.day, feeCharge);
      for (const payoutId of payoutIds) {
        await recordUtxoPayoutSignature(db, { payoutId, network, coin, amount: amounts.get(payoutId)!, inputs: checked.inputs, inputAmounts: checked.inputAmounts, fee: checked.fee, txid: checked.txid });
      }
      await appendUtxoAudit(db, { ...audit, outcome: 'signed' });
      return { rawTransaction: Buffer.from(checked.tx.extract()).toString('hex'), txid: checked.txid, fee: checked.fee, vsize };
    });
    this.options.metrics.signatures.labels('payout').inc();
    this.options.logger.info({ network, txid: answer.txid, fee: answer.fee, vsize: answer.vsize, payouts: payoutIds.length, inputs: checked.inputs.length }, 'signed a UTXO payout transaction');
    return answer;
  }
}
