/**
 * TRC-20 Transfer events as the Tron full node's HTTP API writes them in a TransactionInfo
 * (`/wallet/gettransactioninfobyid`, and one per transaction in `/wallet/gettransactioninfobyblocknum`;
 * java-tron's GetTransactionInfoBy*Servlet, without `visible`): `receipt.result` "SUCCESS" for a
 * contract call that succeeded ("REVERT", "OUT_OF_ENERGY"… otherwise, and `result: "FAILED"`), and
 * `log: [{address, topics, data}]` with the emitting contract as 20 bytes of hex WITHOUT Tron's 0x41
 * prefix, topics and data as bare lower-case hex (no 0x). Shared by the watcher's adapter and the
 * payout check (docs/networks.md#tron-trc-20), so both read a Transfer the same way.
 */
import { base58check } from '../base58check';
import { isRecord } from '../payout-check';
import { tronAddressFromHex } from './address';
import type { CryptoCurrency } from '../coin';
import { TRON_ADDRESS_PREFIX, USDC_TRON, USDT_TRON } from './coins';

/** The TRC-20 tokens the registry has on Tron; their decimals are the registry's. */
export const TRON_TOKENS = { USDT: USDT_TRON, USDC: USDC_TRON } as const satisfies Record<string, CryptoCurrency>;
export type TronTokenCode = keyof typeof TRON_TOKENS;

/** keccak256("Transfer(address,address,uint256)"), as a topic is written (bare hex). */
export const TRANSFER_TOPIC = 'ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

const WORD = /^[0-9a-fA-F]{64}$/;

/** The 20-byte hex (lower case, no 41) a log's `address` carries for a base58 contract ("T…"). */
export function contractLogAddress(contract: string): string {
  const payload = base58check.decode(contract);
  if (payload.length !== 21 || payload[0] !== TRON_ADDRESS_PREFIX) throw new Error(`not a Tron contract address: ${contract}`);
  return Buffer.from(payload.subarray(1)).toString('hex');
}

/**
 * Why a TransactionInfo's transaction failed ("REVERT", "OUT_OF_ENERGY"…), or undefined when it did
 * not: a failed contract call's effects, its events included, were undone. A transaction that ran
 * no contract (a TRX transfer) has no `receipt.result`, and no logs either.
 */
export function failedCall(info: Record<string, unknown>): string | undefined {
  const result = isRecord(info.receipt) ? info.receipt.result : undefined;
  if (result !== undefined && result !== 'SUCCESS') return `receipt.result ${String(result)}`;
  if (info.result === 'FAILED') return 'result FAILED';
  return undefined;
}

/** One Transfer(address,address,uint256) log of a transaction. */
export interface Trc20Transfer {
  /** The log's position in the transaction's `log` array: unique within the transaction. */
  logIndex: number;
  /** The emitting contract: 20 bytes, lower-case hex, no 41 prefix. */
  contract: string;
  /** The recipient, base58check ("T…"). */
  to: string;
  /** In the token's base units. */
  value: bigint;
}

/**
 * Every standard Transfer log of the given contracts in a TransactionInfo (topics: the event,
 * `from`, `to`; the value in `data`), in log order. Logs of other contracts are not looked into
 * (any contract may emit anything), and a Transfer of another layout (an ERC-721 Transfer has 4
 * topics) is not a TRC-20 transfer. Returns undefined when the answer is not in the node's shape
 * (the caller decides what a malformed answer is).
 */
export function trc20TransfersOf(info: Record<string, unknown>, contracts: ReadonlySet<string>): Trc20Transfer[] | undefined {
  const logs = info.log ?? [];
  if (!Array.isArray(logs)) return undefined;
  const transfers: Trc20Transfer[] = [];
  for (const [logIndex, log] of logs.entries()) {
    if (!isRecord(log) || typeof log.address !== 'string') return undefined;
    // java-tron writes the emitting contract as 20 bytes; `visible: true` (never sent here) would make it base58.
    const contract = log.address.toLowerCase().replace(/^41(?=[0-9a-f]{40}$)/, '');
    if (!contracts.has(contract)) continue;
    // java-tron leaves empty fields out of its JSON: an anonymous event (LOG0) has no `topics`, an
    // event without data (Tether's Pause()) no `data`. Only a Transfer of the configured contract
    // is looked into; anything else it emits is not a transfer, never a reason to stop the watcher.
    const topics: unknown = log.topics ?? [];
    if (!Array.isArray(topics) || !topics.every((t): t is string => typeof t === 'string' && WORD.test(t))) return undefined;
    if (topics.length !== 3 || topics[0]!.toLowerCase() !== TRANSFER_TOPIC) continue;
    // An address topic is the 20-byte address left-padded with zeros to 32 bytes; Tron's form prefixes 0x41.
    const to = /^0{24}/.test(topics[2]!) ? tronAddressFromHex(`41${topics[2]!.slice(24)}`) : undefined;
    // A Transfer of the token itself always carries its 32-byte value.
    if (to === undefined || typeof log.data !== 'string' || !WORD.test(log.data)) return undefined;
    transfers.push({ logIndex, contract, to, value: BigInt(`0x${log.data}`) });
  }
  return transfers;
}
