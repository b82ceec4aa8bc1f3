/**
 * The processor's fee and gas choices within the signer's caps (docs/treasury.md#signer-policy):
 * the signer refuses a gas limit, max fee or priority fee above SIGNER_MAX_GAS_LIMIT,
 * SIGNER_MAX_FEE_PER_GAS_WEI, SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI, so the processor never asks
 * for more (services/payout/README.md, "Processor"). Pure functions: bigint wei, no I/O.
 */
import type { EvmFees } from './evm-node';

export interface SignerCaps {
  maxGasLimit: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/** A plain ETH transfer to an account without code: fixed by the protocol. */
export const ETH_TRANSFER_GAS = 21_000n;

/** A replacement raises both fees by at least 12.5 % (geth's and anvil's minimum bump is 10 %). */
const REPLACEMENT_BUMP_PER_MILLE = 1_125n;

export const bumped = (value: bigint): bigint => (value * REPLACEMENT_BUMP_PER_MILLE + 999n) / 1_000n;
const maxOf = (...values: bigint[]): bigint => values.reduce((a, b) => (a > b ? a : b));
const minOf = (...values: bigint[]): bigint => values.reduce((a, b) => (a < b ? a : b));

/**
 * The node's fees clamped to the caps, or undefined when the next block's base fee alone reaches
 * the max-fee cap: no transaction under the cap could be included, so new transfers wait.
 */
export function clampFees(fees: EvmFees, caps: SignerCaps): EvmFees | undefined {
  if (fees.baseFeePerGas >= caps.maxFeePerGas) return undefined;
  const priority = minOf(fees.maxPriorityFeePerGas, caps.maxPriorityFeePerGas);
  return { baseFeePerGas: fees.baseFeePerGas, maxPriorityFeePerGas: priority, maxFeePerGas: minOf(fees.maxFeePerGas, 2n * fees.baseFeePerGas + priority, caps.maxFeePerGas) };
}

/**
 * The fees of a replacement of a transaction signed at (`oldMaxFee`, `oldPriority`): both bumped
 * ≥ 12.5 % and at least the node's current fees, within the caps. Undefined when the caps leave
 * no room for the bump the node requires: a replacement would be refused (by the signer or as
 * "underpriced" by the node), so the transaction is left to be mined as it is.
 */
export function replacementFees(oldMaxFee: bigint, oldPriority: bigint, current: EvmFees, caps: SignerCaps): EvmFees | undefined {
  const priority = maxOf(bumped(oldPriority), current.maxPriorityFeePerGas);
  const maxFee = maxOf(bumped(oldMaxFee), current.maxFeePerGas, priority);
  if (priority > caps.maxPriorityFeePerGas || maxFee > caps.maxFeePerGas) {
    const cappedPriority = minOf(priority, caps.maxPriorityFeePerGas);
    const cappedMaxFee = minOf(maxFee, caps.maxFeePerGas);
    if (cappedPriority < bumped(oldPriority) || cappedMaxFee < bumped(oldMaxFee) || cappedMaxFee < cappedPriority) return undefined;
    return { baseFeePerGas: current.baseFeePerGas, maxPriorityFeePerGas: cappedPriority, maxFeePerGas: cappedMaxFee };
  }
  return { baseFeePerGas: current.baseFeePerGas, maxPriorityFeePerGas: priority, maxFeePerGas: maxFee };
}

/**
 * The gas limit of a payout from the node's estimate: exactly 21,000 for a plain transfer to an
 * account without code; otherwise the estimate plus 10 % (the cost depends on state that may change
 * before it is mined — a contract wallet's receive(), a token's storage), at most the signer's cap.
 */
export function payoutGasLimit(estimate: bigint, caps: SignerCaps): bigint {
  if (estimate <= ETH_TRANSFER_GAS) return ETH_TRANSFER_GAS;
  return minOf((estimate * 11n) / 10n, caps.maxGasLimit);
}
