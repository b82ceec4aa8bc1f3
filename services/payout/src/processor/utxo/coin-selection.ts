/**
 * The UTXO treasury's pure arithmetic (docs/treasury.md#utxo): the virtual size of a P2WPKH
 * transaction, coin selection for a batch of payouts, change or dust, the fee target of Esplora's
 * estimates and the BIP125 replacement of a stuck batch. No I/O: amounts are bigint base units
 * (satoshi, litoshi), rates are FeeRate (msat/vB, ../../domain/fee-rate.ts).
 */
import { feeAt, withinCap, type FeeRate } from '../../domain/fee-rate';

/** An output script's length: P2WPKH (OP_0 <20 bytes>), every address the treasury pays or keeps. */
export const P2WPKH_SCRIPT_BYTES = 22;
/**
 * A P2WPKH input's signature, DER plus the sighash byte, at its longest: 72 bytes (a 33-byte r).
 * Sizes are counted with it, so that a fee computed for them is never below the rate asked.
 */
export const MAX_SIGNATURE_BYTES = 72;
/**
 * The shortest signature the cap is checked against: a DER signature shorter than 69 bytes (with
 * the sighash byte) needs r or s below 2^240 (odds ~2^-15 per input). The fee is computed on the
 * longest size (above) but must stay within the cap on this shortest one, so that the signed
 * transaction's real rate — whatever its signatures' lengths — is within PAYOUT_MAX_FEE_RATE, which
 * the signer checks too.
 */
export const MIN_SIGNATURE_BYTES = 69;
/** BIP125 rule 4: a replacement pays the old fee plus this rate (1 sat/vB, the nodes' incremental relay fee) on its own size. */
export const INCREMENTAL_RELAY_RATE = 1_000n as FeeRate;

function varIntBytes(n: number): number {
  return n < 0xfd ? 1 : n <= 0xffff ? 3 : 5;
}

/**
 * The weight of a segwit transaction spending `inputs` P2WPKH outputs to outputs of these script
 * lengths (BIP141): 4 × (version 4, input count, 41 per input, output count, 8 + script per
 * output, locktime 4) + (marker and flag 2, per input: 1 item count, 1 + signature, 1 + 33 public
 * key). `signatureBytes`: one length for every input, or each input's.
 */
export function p2wpkhWeight(inputs: number, outputScriptLengths: readonly number[], signatureBytes: number | readonly number[] = MAX_SIGNATURE_BYTES): number {
  if (!Number.isInteger(inputs) || inputs < 1) throw new RangeError('a transaction spends at least one input');
  const signatures = typeof signatureBytes === 'number' ? inputs * signatureBytes : signatureBytes.reduce((a, b) => a + b, 0);
  const outputs = outputScriptLengths.reduce((total, length) => total + 8 + varIntBytes(length) + length, 0);
  const base = 4 + varIntBytes(inputs) + 41 * inputs + varIntBytes(outputScriptLengths.length) + outputs + 4;
  const witness = 2 + inputs * (1 + 1 + 1 + 33) + signatures;
  return 4 * base + witness;
}

/** The virtual size: ⌈weight / 4⌉, at the longest signatures unless told. */
export function p2wpkhVsize(inputs: number, outputScriptLengths: readonly number[], signatureBytes: number | readonly number[] = MAX_SIGNATURE_BYTES): number {
  return Math.ceil(p2wpkhWeight(inputs, outputScriptLengths, signatureBytes) / 4);
}

/** Whether `fee` stays within `cap` on the transaction's shortest possible size (MIN_SIGNATURE_BYTES). */
export function withinCapAtShortest(fee: bigint, inputs: number, outputScriptLengths: readonly number[], cap: FeeRate): boolean {
  return withinCap(fee, p2wpkhVsize(inputs, outputScriptLengths, MIN_SIGNATURE_BYTES), cap);
}

export interface SpendableCoin {
  id: string;
  /** Base units. */
  amount: bigint;
}

export interface PayoutOutput {
  payoutId: string;
  /** Base units. */
  amount: bigint;
  scriptLength: number;
}

export interface FeeTerms {
  rate: FeeRate;
  /** PAYOUT_MAX_FEE_RATE_<COIN>: no transaction pays more per vbyte. */
  cap: FeeRate;
  /** A change below this (the coin's dust limit) is left to the fee rather than made an output. */
  dust: bigint;
}

export interface SpendPlan<C extends SpendableCoin = SpendableCoin> {
  inputs: C[];
  payouts: PayoutOutput[];
  /** The change to the treasury's change branch; null when it would be dust (it went to the fee). */
  change: bigint | null;
  fee: bigint;
  /** The virtual size the fee was computed for (longest signatures). */
  vsize: number;
}

const sum = (values: readonly bigint[]) => values.reduce((a, b) => a + b, 0n);

/**
 * The plan of spending exactly `inputs` for `payouts`: change when it is at least the dust limit,
 * else no change and the remainder is the fee — provided that fee stays within the cap. Undefined
 * when the inputs do not cover the payouts and the fee at the rate.
 */
export function planWithInputs<C extends SpendableCoin>(inputs: C[], payouts: readonly PayoutOutput[], terms: FeeTerms): SpendPlan<C> | undefined {
  const total = sum(inputs.map((c) => c.amount));
  const paid = sum(payouts.map((p) => p.amount));
  const scripts = payouts.map((p) => p.scriptLength);
  const withChangeSize = p2wpkhVsize(inputs.length, [...scripts, P2WPKH_SCRIPT_BYTES]);
  const withChangeFee = feeAt(terms.rate, withChangeSize);
  const change = total - paid - withChangeFee;
  if (change >= terms.dust) {
    return withinCapAtShortest(withChangeFee, inputs.length, [...scripts, P2WPKH_SCRIPT_BYTES], terms.cap) ? { inputs, payouts: [...payouts], change, fee: withChangeFee, vsize: withChangeSize } : undefined;
  }
  const size = p2wpkhVsize(inputs.length, scripts);
  const fee = total - paid;
  if (fee < feeAt(terms.rate, size) || !withinCapAtShortest(fee, inputs.length, scripts, terms.cap)) return undefined;
  return { inputs, payouts: [...payouts], change: null, fee, vsize: size };
}

/**
 * Coins for `payouts`, fewest inputs first (docs/treasury.md#utxo): the smallest single coin that
 * covers them with the fee, else the largest coins, one at a time, until they do. Undefined when
 * all the coins together do not cover them.
 */
export function selectCoins<C extends SpendableCoin>(coins: readonly C[], payouts: readonly PayoutOutput[], terms: FeeTerms, maxInputs = 500): SpendPlan<C> | undefined {
  if (payouts.length === 0) return undefined;
  const ascending = [...coins].sort((a, b) => (a.amount < b.amount ? -1 : a.amount > b.amount ? 1 : a.id.localeCompare(b.id)));
  for (const coin of ascending) {
    const plan = planWithInputs([coin], payouts, terms);
    if (plan) return plan;
  }
  const descending = ascending.reverse();
  const inputs: C[] = [];
  for (const coin of descending.slice(0, maxInputs)) {
    inputs.push(coin);
    if (inputs.length === 1) continue; // a single coin was tried above
    const plan = planWithInputs([...inputs], payouts, terms);
    if (plan) return plan;
  }
  return undefined;
}

/**
 * A batch of `payouts` (oldest first) that the coins can pay: each payout joins when the batch
 * with it can still be paid; one that cannot waits for the next batch and never fails the others.
 * At most `maxPayouts` join; one more than all the coins together is passed over without a
 * selection (a long queue of such payouts is looked at every round).
 */
export function planBatch<C extends SpendableCoin>(coins: readonly C[], payouts: readonly PayoutOutput[], terms: FeeTerms, options: { maxInputs?: number; maxPayouts?: number } = {}): SpendPlan<C> | undefined {
  let plan: SpendPlan<C> | undefined;
  const included: PayoutOutput[] = [];
  const total = sum(coins.map((c) => c.amount));
  let paid = 0n;
  for (const payout of payouts) {
    if (included.length >= (options.maxPayouts ?? Infinity)) break;
    if (paid + payout.amount > total) continue;
    const attempt = selectCoins(coins, [...included, payout], terms, options.maxInputs);
    if (!attempt) continue;
    included.push(payout);
    paid += payout.amount;
    plan = attempt;
  }
  return plan;
}

export interface ReplacedVersion {
  /** Sum of the inputs (the same in every version). */
  inputTotal: bigint;
  payouts: readonly PayoutOutput[];
  inputs: number;
  change: bigint | null;
  fee: bigint;
}

/**
 * The next version of a stuck batch (BIP125): the same inputs and payout outputs, the fee out of
 * the change — at least the current rate and at least the old fee plus 1 sat/vB on the new size
 * (rule 4), within the cap. A change that would fall below dust is dropped (its remainder to the
 * fee). Undefined when no replacement fits: no change to take it from, or above the cap.
 */
export function replacementPlan(old: ReplacedVersion, terms: FeeTerms): { change: bigint | null; fee: bigint; vsize: number } | undefined {
  if (old.change === null) return undefined;
  const paid = sum(old.payouts.map((p) => p.amount));
  const scripts = old.payouts.map((p) => p.scriptLength);
  const withChange = p2wpkhVsize(old.inputs, [...scripts, P2WPKH_SCRIPT_BYTES]);
  const needed = (size: number) => {
    const atRate = feeAt(terms.rate, size);
    const bumped = old.fee + feeAt(INCREMENTAL_RELAY_RATE, size);
    return atRate > bumped ? atRate : bumped;
  };
  const fee = needed(withChange);
  const change = old.inputTotal - paid - fee;
  if (change >= terms.dust) return withinCapAtShortest(fee, old.inputs, [...scripts, P2WPKH_SCRIPT_BYTES], terms.cap) ? { change, fee, vsize: withChange } : undefined;
  const size = p2wpkhVsize(old.inputs, scripts);
  const allFee = old.inputTotal - paid;
  if (allFee < needed(size) || !withinCapAtShortest(allFee, old.inputs, scripts, terms.cap)) return undefined;
  return { change: null, fee: allFee, vsize: size };
}

/**
 * Esplora's `/fee-estimates` (confirmation target in blocks → sat/vB) read for `target` blocks:
 * the rate of the nearest listed target at most `target` (a shorter target: a rate at least as
 * high); when none is listed that low, the smallest listed target. Undefined for no estimates.
 */
export function rateForTarget(estimates: ReadonlyMap<number, FeeRate>, target: number): FeeRate | undefined {
  const targets = [...estimates.keys()].sort((a, b) => a - b);
  if (targets.length === 0) return undefined;
  const chosen = targets.filter((t) => t <= target).at(-1) ?? targets[0]!;
  return estimates.get(chosen);
}
