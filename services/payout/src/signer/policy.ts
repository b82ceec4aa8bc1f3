/**
 * What the signer signs (docs/treasury.md#signer-policy), decided here and nowhere else: the
 * request's EvmTransaction decoded once, then checked against the rules of every request (network,
 * chain id, fee, priority fee and gas caps, the day's fee budget) and of its purpose. A refusal names its rule; the service audits and
 * counts it (service.ts).
 */
import { Code } from '@coinvoice/runtime';
import { checksumAddress, decodeTokenTransfer, type Eip1559Transaction, type HexString } from '@coinvoice/chains/evm/signing-keys';
import type { EvmTransaction } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { Decimal } from '@coinvoice/domain/money';
import type { AutoMaxima, SignerAsset } from './settings';

/** The network the Ethereum signer signs for (the networks issue adds others). */
export const SIGNER_NETWORK = 'ethereum';

/** The stable codes of refusals (ErrorDetail.code, the `rule` of audit rows and of signer_refusals_total). */
export type RefusalRule =
  | 'caller_not_allowed'
  | 'invalid_request'
  | 'network_not_supported'
  | 'chain_id_mismatch'
  | 'fee_above_cap'
  | 'priority_fee_above_cap'
  | 'gas_limit_above_cap'
  | 'payout_not_signable'
  | 'asset_not_supported'
  | 'destination_mismatch'
  | 'amount_mismatch'
  | 'call_data_mismatch'
  | 'amount_above_limit'
  | 'daily_limit_exceeded'
  | 'nonce_mismatch'
  | 'replacement_mismatch'
  | 'gas_top_up_above_cap'
  | 'daily_gas_top_up_limit_exceeded'
  | 'daily_fee_budget_exceeded'
  // Tron (tron.ts)
  | 'source_mismatch'
  | 'fee_limit_above_cap'
  | 'expiration_out_of_window'
  | 'resign_before_expiration'
  // UTXO transactions (docs/treasury.md#utxo-signer-policy):
  | 'input_not_ours'
  | 'not_replaceable'
  | 'duplicate_input'
  | 'change_mismatch'
  | 'output_not_allowed'
  | 'fee_not_positive'
  | 'fee_rate_above_cap'
  | 'inputs_mismatch'
  | 'input_amount_mismatch'
  | 'fee_not_higher';

/** A request the policy refuses: PermissionDenied (InvalidArgument for a malformed one) naming the rule. */
export class Refusal extends Error {
  constructor(
    readonly rule: RefusalRule,
    message: string,
    readonly connectCode: Code = rule === 'invalid_request' ? Code.InvalidArgument : Code.PermissionDenied,
  ) {
    super(message);
    this.name = 'Refusal';
  }
}

/** The request's transaction as the policy reads it: `to` EIP-55, data lower-case hex. */
export type DecodedTransaction = Eip1559Transaction;

const UINT256_MAX = 2n ** 256n - 1n;

function wholeNumber(field: string, raw: string): bigint {
  if (!/^\d{1,78}$/.test(raw)) throw new Refusal('invalid_request', `transaction.${field} must be a non-negative integer decimal string`);
  const value = BigInt(raw);
  if (value > UINT256_MAX) throw new Refusal('invalid_request', `transaction.${field} is out of range`);
  return value;
}

/** Decodes the request's transaction; a malformed one is refused as invalid_request. */
export function decodeTransaction(transaction: EvmTransaction | undefined): DecodedTransaction {
  if (!transaction) throw new Refusal('invalid_request', 'transaction is required');
  const to = checksumAddress(transaction.to);
  if (!to) throw new Refusal('invalid_request', 'transaction.to must be a 0x-prefixed 20-byte address');
  if (!/^0x([0-9a-fA-F]{2})*$/.test(transaction.data)) throw new Refusal('invalid_request', 'transaction.data must be 0x-prefixed hex bytes ("0x" for none)');
  if (transaction.nonce > BigInt(Number.MAX_SAFE_INTEGER)) throw new Refusal('invalid_request', 'transaction.nonce is out of range');
  if (transaction.chainId > BigInt(Number.MAX_SAFE_INTEGER)) throw new Refusal('invalid_request', 'transaction.chain_id is out of range');
  const decoded: DecodedTransaction = {
    chainId: Number(transaction.chainId),
    nonce: Number(transaction.nonce),
    to,
    value: wholeNumber('value', transaction.value),
    data: transaction.data.toLowerCase() as HexString,
    gas: transaction.gasLimit,
    maxFeePerGas: wholeNumber('max_fee_per_gas', transaction.maxFeePerGas),
    maxPriorityFeePerGas: wholeNumber('max_priority_fee_per_gas', transaction.maxPriorityFeePerGas),
  };
  if (decoded.maxPriorityFeePerGas > decoded.maxFeePerGas) {
    throw new Refusal('invalid_request', 'transaction.max_priority_fee_per_gas exceeds max_fee_per_gas');
  }
  if (decoded.gas < 21_000n) throw new Refusal('invalid_request', 'transaction.gas_limit is below 21000, the cost of any transaction');
  return decoded;
}

export interface CommonLimits {
  chainId: number;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  maxGasLimit: bigint;
}

/** The rules of every request: the network, its chain id, the fee, priority fee and gas caps. */
export function checkCommon(network: string, tx: DecodedTransaction, limits: CommonLimits): void {
  if (network !== SIGNER_NETWORK) throw new Refusal('network_not_supported', `network ${JSON.stringify(network.slice(0, 32))} is not signed here; only ${SIGNER_NETWORK}`);
  if (tx.chainId !== limits.chainId) throw new Refusal('chain_id_mismatch', `chain id ${tx.chainId} is not the network's (${limits.chainId})`);
  if (tx.maxFeePerGas > limits.maxFeePerGas) {
    throw new Refusal('fee_above_cap', `max_fee_per_gas ${tx.maxFeePerGas} wei exceeds the cap SIGNER_MAX_FEE_PER_GAS_WEI (${limits.maxFeePerGas})`);
  }
  if (tx.maxPriorityFeePerGas > limits.maxPriorityFeePerGas) {
    throw new Refusal(
      'priority_fee_above_cap',
      `max_priority_fee_per_gas ${tx.maxPriorityFeePerGas} wei exceeds the cap SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI (${limits.maxPriorityFeePerGas})`,
    );
  }
  if (tx.gas > limits.maxGasLimit) throw new Refusal('gas_limit_above_cap', `gas_limit ${tx.gas} exceeds the cap SIGNER_MAX_GAS_LIMIT (${limits.maxGasLimit})`);
}

/** The most `tx` can cost in fees (wei): every unit of its gas limit at its max fee. */
export function maxFeeOf(tx: DecodedTransaction): bigint {
  return tx.gas * tx.maxFeePerGas;
}

/**
 * The day's fee budget (docs/treasury.md#signer-policy): the fees already signed today plus this
 * signature's charge must stay within SIGNER_DAILY_FEE_LIMIT_WEI.
 */
export function checkFeeBudget(signedToday: bigint, charge: bigint, limit: bigint): void {
  if (signedToday + charge > limit) {
    throw new Refusal(
      'daily_fee_budget_exceeded',
      `fees signed today (UTC) ${signedToday} + this ${charge} wei (gas_limit × max_fee_per_gas) exceed SIGNER_DAILY_FEE_LIMIT_WEI (${limit})`,
    );
  }
}

/** What a transaction moves: to whom, how much (base units), and which asset. */
export interface Movement {
  asset: SignerAsset;
  recipient: HexString;
  amount: bigint;
}

/**
 * The movement `tx` makes if it is a plain transfer of `asset`: ETH as value with no call data,
 * a token as transfer(recipient, amount) to the asset's contract with no value. Refuses anything else.
 */
export function movementOf(tx: DecodedTransaction, asset: SignerAsset, contracts: Record<'USDT' | 'USDC', HexString>): Movement {
  if (asset === 'ETH') {
    if (tx.data !== '0x') throw new Refusal('call_data_mismatch', 'an ETH transfer carries no call data ("0x")');
    return { asset, recipient: tx.to, amount: tx.value };
  }
  if (tx.to !== contracts[asset]) throw new Refusal('destination_mismatch', `a ${asset} transfer goes to the ${asset} contract ${contracts[asset]}, not ${tx.to}`);
  if (tx.value !== 0n) throw new Refusal('amount_mismatch', `a ${asset} transfer carries no ETH value`);
  const transfer = decodeTokenTransfer(tx.data);
  if (!transfer) throw new Refusal('call_data_mismatch', `a ${asset} transfer's data is exactly transfer(address, uint256)`);
  return { asset, ...transfer };
}

/** A payout row as the signer reads it (payout.payouts, read-only). */
export interface PayoutRow {
  id: string;
  environment: string;
  status: string;
  currency: string;
  /** The network the payout is sent on (payouts.network, migration 0500). */
  network: string;
  amount: string;
  address: string;
  verified: boolean;
  /** An operator approved it (Approve: payouts.approved_at). */
  approved: boolean;
  completed: boolean;
}


/** A payout may be signed while it is live, Pending, verified, approved or within the auto maximum, and not completed. */
export function checkPayoutSignable(payout: PayoutRow | undefined, payoutId: string, autoMax: AutoMaxima): PayoutRow {
  if (!payout) throw new Refusal('payout_not_signable', `payout ${payoutId} does not exist`);
  const problems = [
    payout.environment !== 'live' ? `is ${payout.environment}, not live` : undefined,
    payout.status !== 'Pending' ? `is ${payout.status}, not Pending` : undefined,
    !payout.verified ? 'is not verified' : undefined,
    !payout.approved && new Decimal(payout.amount).gt(autoMax[payout.currency] ?? '0')
      ? `is not approved by an operator and above PAYOUT_AUTO_MAX_${payout.currency} (${autoMax[payout.currency] ?? '0'})`
      : undefined,
    payout.completed ? 'is completed' : undefined,
  ].filter((p): p is string => p !== undefined);
  if (problems.length > 0) throw new Refusal('payout_not_signable', `payout ${payoutId} ${problems.join(', ')}`);
  return payout;
}

/** The payout's movement must be exactly the transaction's. */
export function checkPayoutMovement(movement: Movement, payoutAddress: HexString, payoutAmount: bigint): void {
  if (movement.recipient !== payoutAddress) {
    throw new Refusal('destination_mismatch', `the transfer pays ${movement.recipient}, not the payout's address ${payoutAddress}`);
  }
  if (movement.amount !== payoutAmount) {
    throw new Refusal('amount_mismatch', `the transfer moves ${movement.amount} base units, not the payout's ${payoutAmount}`);
  }
}
