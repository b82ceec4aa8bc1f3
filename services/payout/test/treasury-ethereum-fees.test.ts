/**
 * Rule (docs/treasury.md#signer-policy, services/payout/README.md "Processor"): the processor asks
 * the signer for no gas limit, max fee or priority fee above SIGNER_MAX_GAS_LIMIT,
 * SIGNER_MAX_FEE_PER_GAS_WEI and SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI: its fees and replacement
 * bumps are clamped to them; while the base fee alone reaches the max-fee cap it waits; a
 * replacement the caps leave no room for (the node wants ≥ 10 % more) is not asked for.
 */
import { clampFees, payoutGasLimit, replacementFees, type SignerCaps } from '../src/processor/fees';

const gwei = (n: number): bigint => BigInt(Math.round(n * 1_000)) * 1_000_000n;
const caps: SignerCaps = { maxGasLimit: 100_000n, maxFeePerGas: gwei(200), maxPriorityFeePerGas: gwei(5) };
const node = (base: number, priority: number) => ({ baseFeePerGas: gwei(base), maxPriorityFeePerGas: gwei(priority), maxFeePerGas: 2n * gwei(base) + gwei(priority) });

test('ordinary fees pass unchanged: 2 × base + priority', () => {
  expect(clampFees(node(20, 1), caps)).toEqual(node(20, 1));
});

test('a priority fee above its cap is lowered to the cap, and the max fee with it', () => {
  expect(clampFees(node(20, 8), caps)).toEqual({ baseFeePerGas: gwei(20), maxPriorityFeePerGas: gwei(5), maxFeePerGas: gwei(45) });
});

test('a max fee above its cap is lowered to the cap while the base fee is under it', () => {
  expect(clampFees(node(150, 1), caps)).toEqual({ baseFeePerGas: gwei(150), maxPriorityFeePerGas: gwei(1), maxFeePerGas: gwei(200) });
});

test('a base fee at or above the max-fee cap: no fees (new transfers wait)', () => {
  expect(clampFees(node(200, 1), caps)).toBeUndefined();
  expect(clampFees(node(250, 1), caps)).toBeUndefined();
});

test('a replacement bumps both fees by 12.5 % (at least the node\'s current fees)', () => {
  expect(replacementFees(gwei(41), gwei(1), node(20, 1), caps)).toEqual({ baseFeePerGas: gwei(20), maxPriorityFeePerGas: gwei(1.125), maxFeePerGas: gwei(46.125) });
  expect(replacementFees(gwei(41), gwei(1), node(30, 2), caps)).toEqual({ baseFeePerGas: gwei(30), maxPriorityFeePerGas: gwei(2), maxFeePerGas: gwei(62) });
});

test('a replacement is clamped to the caps while that still leaves the 12.5 % bump', () => {
  // The node suggests a 9 gwei tip: the bump of 4 gwei (4.5) is enough, the tip stays under 5.
  expect(replacementFees(gwei(100), gwei(4), node(40, 9), caps)).toEqual({ baseFeePerGas: gwei(40), maxPriorityFeePerGas: gwei(5), maxFeePerGas: gwei(112.5) });
  // The base fee wants 2 × 120 + 1 = 241 gwei: clamped to 200, still ≥ 12.5 % over 150.
  expect(replacementFees(gwei(150), gwei(1), node(120, 1), caps)).toEqual({ baseFeePerGas: gwei(120), maxPriorityFeePerGas: gwei(1.125), maxFeePerGas: gwei(200) });
});

test('no replacement when the caps leave no room for the bump', () => {
  expect(replacementFees(gwei(190), gwei(1), node(20, 1), caps)).toBeUndefined();
  expect(replacementFees(gwei(50), gwei(4.9), node(20, 1), caps)).toBeUndefined();
});

test('a payout\'s gas: 21,000 to an account without code, else the estimate + 10 % up to the signer\'s cap', () => {
  expect(payoutGasLimit(21_000n, caps)).toBe(21_000n);
  expect(payoutGasLimit(45_000n, caps)).toBe(49_500n);
  expect(payoutGasLimit(95_000n, caps)).toBe(100_000n);
});
