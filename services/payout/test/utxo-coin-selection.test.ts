/**
 * The UTXO treasury's arithmetic (services/payout/src/processor/utxo/coin-selection.ts,
 * docs/treasury.md#utxo): P2WPKH virtual sizes against real signed transactions, coin selection
 * (fewest inputs), change or dust, batches that leave out what does not fit, BIP125 replacements
 * and the fee target read from Esplora's estimates.
 */
import { randomBytes } from 'node:crypto';
import { p2wpkh, Transaction } from '@scure/btc-signer';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { feeAt, withinCap, type FeeRate } from '../src/domain/fee-rate';
import {
  INCREMENTAL_RELAY_RATE,
  MIN_SIGNATURE_BYTES,
  p2wpkhVsize,
  p2wpkhWeight,
  planBatch,
  planWithInputs,
  rateForTarget,
  replacementPlan,
  selectCoins,
  type FeeTerms,
  type PayoutOutput,
} from '../src/processor/utxo/coin-selection';
import { buildPsbt, p2wpkhScript } from '../src/processor/utxo/psbt';

const rate = (satPerVb: number) => BigInt(Math.round(satPerVb * 1000)) as FeeRate;
const terms = (satPerVb: number, overrides: Partial<FeeTerms> = {}): FeeTerms => ({ rate: rate(satPerVb), cap: rate(100), dust: 294n, ...overrides });
const payout = (id: string, amount: bigint): PayoutOutput => ({ payoutId: id, amount, scriptLength: 22 });
const coin = (id: string, amount: bigint) => ({ id, amount });

/** A signed P2WPKH transaction of `inputs` random keys paying `outputs` outputs, as a wallet makes it. */
function signedTransaction(inputs: number, outputs: number) {
  const keys = Array.from({ length: inputs }, () => secp256k1.utils.randomSecretKey());
  const tx = new Transaction();
  for (const key of keys) {
    tx.addInput({ txid: randomBytes(32), index: 0, witnessUtxo: { script: p2wpkh(secp256k1.getPublicKey(key)).script, amount: 100_000n }, sequence: 0xfffffffd });
  }
  for (let i = 0; i < outputs; i++) tx.addOutput({ script: p2wpkh(secp256k1.getPublicKey(secp256k1.utils.randomSecretKey())).script, amount: 1_000n });
  keys.forEach((key, i) => tx.signIdx(key, i));
  tx.finalize();
  return tx;
}

describe('P2WPKH virtual size', () => {
  test.each([
    [1, 1],
    [1, 2],
    [2, 4],
    [5, 3],
    [3, 51],
  ])('%i inputs, %i outputs: exactly the signed transaction\'s size for its signature lengths, and never below it at the longest', (inputs, outputs) => {
    for (let attempt = 0; attempt < 5; attempt++) {
      const tx = signedTransaction(inputs, outputs);
      const signatureLengths = Array.from({ length: inputs }, (_, i) => tx.getInput(i).finalScriptWitness![0]!.length);
      // Exact: the formula with the signatures' actual lengths (71 or 72 bytes).
      expect(tx.weight).toBe(p2wpkhWeight(inputs, Array(outputs).fill(22), signatureLengths));
      expect(tx.vsize).toBe(p2wpkhVsize(inputs, Array(outputs).fill(22), signatureLengths));
      expect(tx.vsize).toBeLessThanOrEqual(p2wpkhVsize(inputs, Array(outputs).fill(22)));
      expect(p2wpkhVsize(inputs, Array(outputs).fill(22)) - tx.vsize).toBeLessThanOrEqual(Math.ceil(inputs / 4));
    }
  });

  test('the well-known sizes: 1-in 2-out P2WPKH is 141 vB at 72-byte signatures, each further output 31, each further input 68', () => {
    expect(p2wpkhVsize(1, [22, 22])).toBe(141);
    expect(p2wpkhVsize(1, [22, 22, 22]) - p2wpkhVsize(1, [22, 22])).toBe(31);
    expect(p2wpkhVsize(3, [22]) - p2wpkhVsize(2, [22])).toBe(68);
  });
});

describe('coin selection', () => {
  test('the smallest single coin that covers the payouts and the fee, with change', () => {
    const coins = [coin('a', 5_000n), coin('b', 60_000n), coin('c', 40_000n), coin('d', 1_000_000n)];
    const plan = selectCoins(coins, [payout('p', 30_000n)], terms(10))!;
    expect(plan.inputs.map((c) => c.id)).toEqual(['c']);
    const size = p2wpkhVsize(1, [22, 22]);
    expect(plan.vsize).toBe(size);
    expect(plan.fee).toBe(feeAt(rate(10), size));
    expect(plan.change).toBe(40_000n - 30_000n - plan.fee);
  });

  test('largest first when no single coin covers them: the fewest inputs', () => {
    const coins = [coin('a', 10_000n), coin('b', 30_000n), coin('c', 25_000n), coin('d', 20_000n)];
    const plan = selectCoins(coins, [payout('p', 50_000n)], terms(2))!;
    expect(plan.inputs.map((c) => c.id)).toEqual(['b', 'c']);
    expect(plan.change! + plan.fee + 50_000n).toBe(55_000n);
  });

  test('a change below dust goes to the fee (no change output), within the cap', () => {
    const size = p2wpkhVsize(1, [22]);
    const needed = 10_000n + feeAt(rate(1), size);
    const plan = selectCoins([coin('a', needed + 200n)], [payout('p', 10_000n)], terms(1))!;
    expect(plan.change).toBeNull();
    expect(plan.vsize).toBe(size);
    expect(plan.fee).toBe(feeAt(rate(1), size) + 200n);
    expect(withinCap(plan.fee, plan.vsize, rate(100))).toBe(true);
  });

  test('a remainder that would push the fee above the cap is not given to the fee', () => {
    const size = p2wpkhVsize(1, [22]);
    // A 250-sat remainder on ~110 vB at a 2 sat/vB cap would be ~4 sat/vB: refused.
    expect(planWithInputs([coin('a', 10_000n + feeAt(rate(1), size) + 250n)], [payout('p', 10_000n)], terms(1, { cap: rate(2), dust: 294n }))).toBeUndefined();
  });

  test('the cap holds on the shortest size the signatures can give: a rate at the cap is refused, one 1 % under it passes', () => {
    const shortest = p2wpkhVsize(1, [22, 22], MIN_SIGNATURE_BYTES);
    expect([p2wpkhVsize(1, [22, 22]), shortest]).toEqual([141, 140]);
    const cap = rate(10);
    expect(selectCoins([coin('a', 50_000n)], [payout('p', 30_000n)], terms(10, { cap }))).toBeUndefined();
    const plan = selectCoins([coin('a', 50_000n)], [payout('p', 30_000n)], terms(9.9, { cap }))!;
    expect(plan.fee).toBe(1_396n);
    expect(withinCap(plan.fee, shortest, cap)).toBe(true);
  });

  test('coins that do not cover the payouts: no plan', () => {
    expect(selectCoins([coin('a', 10_000n), coin('b', 5_000n)], [payout('p', 15_000n)], terms(1))).toBeUndefined();
  });

  test('a batch takes every payout it can pay, in order, and leaves out the one that does not fit', () => {
    const coins = [coin('a', 100_000n)];
    const plan = planBatch(coins, [payout('p1', 30_000n), payout('big', 90_000n), payout('p2', 20_000n), payout('p3', 10_000n)], terms(5))!;
    expect(plan.payouts.map((p) => p.payoutId)).toEqual(['p1', 'p2', 'p3']);
    expect(plan.vsize).toBe(p2wpkhVsize(1, [22, 22, 22, 22]));
    expect(plan.change! + plan.fee).toBe(100_000n - 60_000n);
  });

  test('at most maxPayouts join, oldest first; a payout above all the coins is passed over without a selection (docs/treasury.md#payouts-that-cannot-go-yet)', () => {
    const coins = [coin('a', 60_000n), coin('b', 50_000n)];
    const queue = [payout('huge1', 500_000n), payout('huge2', 500_000n), payout('p1', 10_000n), payout('p2', 10_000n), payout('p3', 10_000n)];
    const plan = planBatch(coins, queue, terms(5), { maxPayouts: 2 })!;
    expect(plan.payouts.map((p) => p.payoutId)).toEqual(['p1', 'p2']);
    // A thousand payouts above the coins cost no coin selection each.
    const many = [...Array.from({ length: 1_000 }, (_, i) => payout(`huge${i}`, 10_000_000n)), payout('fits', 10_000n)];
    const started = performance.now();
    expect(planBatch(Array.from({ length: 200 }, (_, i) => coin(`c${i}`, 1_000n + BigInt(i))), many, terms(1), { maxPayouts: 50 })?.payouts.map((p) => p.payoutId)).toEqual(['fits']);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

describe('replacement (BIP125)', () => {
  const inputs = 2;
  const payouts = [payout('p1', 30_000n), payout('p2', 20_000n)];
  const old = { inputTotal: 100_000n, payouts, inputs, change: 100_000n - 50_000n - 1_000n, fee: 1_000n };

  test('the same outputs, the fee out of the change: at least old fee + 1 sat/vB on the new size', () => {
    const size = p2wpkhVsize(inputs, [22, 22, 22]);
    const next = replacementPlan(old, terms(1))!;
    expect(next.vsize).toBe(size);
    expect(next.fee).toBe(1_000n + feeAt(INCREMENTAL_RELAY_RATE, size));
    expect(next.change! + next.fee).toBe(old.change + old.fee);
  });

  test('the current rate when it asks more than the bump', () => {
    const size = p2wpkhVsize(inputs, [22, 22, 22]);
    expect(replacementPlan(old, terms(40))!.fee).toBe(feeAt(rate(40), size));
  });

  test('above the cap: no replacement (it waits)', () => {
    expect(replacementPlan(old, terms(40, { cap: rate(30) }))).toBeUndefined();
  });

  test('a change that would fall below dust is dropped into the fee', () => {
    const tight = { inputTotal: 51_000n, payouts, inputs, change: 500n, fee: 500n };
    const next = replacementPlan(tight, terms(1))!;
    expect(next.change).toBeNull();
    expect(next.fee).toBe(1_000n);
  });

  test('no change to take a higher fee from: no replacement', () => {
    expect(replacementPlan({ ...old, change: null }, terms(1))).toBeUndefined();
  });
});

describe('fee target', () => {
  const estimates = new Map<number, FeeRate>([[1, rate(50)], [2, rate(40)], [3, rate(30)], [6, rate(12)], [144, rate(1)]]);
  test('the listed target, else the nearest listed below it, else the smallest listed', () => {
    expect(rateForTarget(estimates, 6)).toBe(rate(12));
    expect(rateForTarget(estimates, 5)).toBe(rate(30));
    expect(rateForTarget(new Map([[2, rate(9)]]), 1)).toBe(rate(9));
    expect(rateForTarget(new Map(), 6)).toBeUndefined();
  });
});

describe('PSBT', () => {
  test('inputs signal BIP125, carry their witness output, and the outputs are the payouts then the change', () => {
    const address = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
    const psbt = buildPsbt([{ txid: 'ab'.repeat(32), vout: 3, amount: 50_000n, address }], [{ address, amount: 20_000n }, { address, amount: 29_000n }]);
    const tx = Transaction.fromPSBT(Buffer.from(psbt, 'base64'));
    expect(tx.inputsLength).toBe(1);
    expect(tx.getInput(0).sequence).toBe(0xfffffffd);
    expect(tx.getInput(0).index).toBe(3);
    expect(tx.getInput(0).witnessUtxo!.amount).toBe(50_000n);
    expect(Buffer.from(tx.getInput(0).witnessUtxo!.script).equals(Buffer.from(p2wpkhScript(address)))).toBe(true);
    expect([tx.getOutput(0).amount, tx.getOutput(1).amount]).toEqual([20_000n, 29_000n]);
  });
});
