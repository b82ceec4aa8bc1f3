/**
 * The on-chain check of TRX and TRC-20 (USDT, USDC) payouts (../payout-check.ts) over the Tron
 * full-node HTTP API the watcher follows (CHAIN_TRON_API_URL, java-tron `/wallet/*`):
 * `gettransactioninfobyid` must place the transaction in a block, and `gettransactionbyid` must
 * show it succeeded (`ret[0].contractRet` SUCCESS). A TRX payout needs a TransferContract paying
 * the payout's address exactly its amount in sun; any other contract — a TRC-20
 * `TriggerSmartContract`, a TRC-10 `TransferAssetContract` — moves another asset. A TRC-20 payout
 * needs a Transfer event of the configured contract (CHAIN_TRON_<TOKEN>_CONTRACT) in the
 * transaction's info (a call whose `receipt.result` is not SUCCESS undid its events) to the address of exactly the amount in the token's
 * base units, read as the watcher reads it (trc20.ts): whichever contract was called (a batch
 * payout emits one per recipient), what counts is the token's event.
 */
import { tronAddressFromHex } from './address';
import { contractLogAddress, failedCall, trc20TransfersOf, type TronTokenCode } from './trc20';
import { baseUnitsOf, ChainUnavailable, failedOnChain, fetchJson, formatUnits, isRecord, mismatch, notMined, payoutBaseUnits, type ChainCheckInput, type ChainCheckResult, type PayoutChainCheck } from '../payout-check';

export interface TronCheckSettings {
  apiUrl: string;
  timeoutMs: number;
  /** The configured TRC-20 contract (base58) per token; a token left out has no check (fails closed). */
  contracts?: Readonly<Partial<Record<TronTokenCode, string>>>;
}

export class TronPayoutCheck implements PayoutChainCheck {
  private readonly base: string;

  constructor(private readonly settings: TronCheckSettings) {
    this.base = settings.apiUrl.replace(/\/+$/, '');
  }

  async check(input: ChainCheckInput): Promise<ChainCheckResult> {
    // A token on Tron (TRC-20) is a contract's Transfer event, never a TransferContract: without its contract, fail closed.
    const contract = input.coin.token ? this.settings.contracts?.[input.coin.code as TronTokenCode] : undefined;
    if (input.coin.code !== 'TRX' && (contract === undefined || contract === '')) throw new Error(`no on-chain check of ${input.coin.code} payouts on Tron: no contract configured`);
    const [tx, info] = await Promise.all([this.post('/wallet/gettransactionbyid', input.transactionHash), this.post('/wallet/gettransactioninfobyid', input.transactionHash)]);
    // The API answers `{}` for a transaction it does not know, and no block number before it is mined.
    if (isEmpty(tx) || isEmpty(info) || !Number.isSafeInteger(info.blockNumber)) return notMined('Tron');
    if (tx.txID !== input.transactionHash || info.id !== input.transactionHash || !isRecord(tx.raw_data) || !Array.isArray(tx.raw_data.contract)) {
      throw new ChainUnavailable(`tron: the answer for ${input.transactionHash} is not that transaction`);
    }
    const ret = Array.isArray(tx.ret) && isRecord(tx.ret[0]) ? tx.ret[0].contractRet : undefined;
    if (ret !== 'SUCCESS') return failedOnChain(`contractRet ${typeof ret === 'string' ? ret : 'missing'}`);
    const expected = payoutBaseUnits(input);
    if (contract !== undefined) return this.checkToken(input, info, contractLogAddress(contract), expected);
    const transfers = tx.raw_data.contract.flatMap((contract) => trxTransferOf(contract, input.transactionHash) ?? []);
    if (transfers.some((t) => t.to === input.address && t.amountSun === expected)) return { ok: true };
    const [first] = transfers;
    if (first === undefined) {
      const types = tx.raw_data.contract.map((c) => (isRecord(c) && typeof c.type === 'string' ? c.type : 'unknown')).join(', ');
      return mismatch(`this transaction is a ${types}, not a TRX transfer (TransferContract) of ${input.amount} TRX to ${input.address}`);
    }
    return mismatch(`this transaction sends ${formatUnits(first.amountSun, input.coin)} TRX to ${first.to ?? 'an address that is not a Tron address'}, not ${input.amount} TRX to ${input.address}`);
  }

  /** A TRC-20 payout: the token's Transfer event to the address of exactly the amount. */
  private checkToken(input: ChainCheckInput, info: Record<string, unknown>, contract: string, expected: bigint): ChainCheckResult {
    const failed = failedCall(info);
    if (failed !== undefined) return failedOnChain(failed);
    const transfers = trc20TransfersOf(info, new Set([contract]));
    if (!transfers) throw new ChainUnavailable(`tron: transaction ${input.transactionHash} has a malformed log`);
    if (transfers.some((t) => t.to === input.address && t.value === expected)) return { ok: true };
    const [first] = transfers;
    const code = input.coin.code;
    if (first === undefined) return mismatch(`this transaction has no ${code} (TRC-20) transfer; a payout of ${input.amount} ${code} to ${input.address} needs one`);
    return mismatch(`this transaction sends ${formatUnits(first.value, input.coin)} ${code} to ${first.to}, not ${input.amount} ${code} to ${input.address}`);
  }

  private async post(path: string, txid: string): Promise<Record<string, unknown>> {
    const body = await fetchJson(`${this.base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ value: txid }),
      timeoutMs: this.settings.timeoutMs,
    });
    if (!isRecord(body)) throw new ChainUnavailable(`tron ${path}: not a JSON object`);
    return body;
  }
}

function isEmpty(value: Record<string, unknown>): boolean {
  return Object.keys(value).length === 0;
}

/** A TransferContract's destination (base58) and amount in sun; undefined for any other contract. */
function trxTransferOf(contract: unknown, txid: string): { to: string | undefined; amountSun: bigint } | undefined {
  if (!isRecord(contract) || contract.type !== 'TransferContract') return undefined;
  const value = isRecord(contract.parameter) && isRecord(contract.parameter.value) ? contract.parameter.value : undefined;
  const amountSun = value && baseUnitsOf(value.amount);
  if (!value || typeof value.to_address !== 'string' || amountSun === undefined) {
    throw new ChainUnavailable(`tron: transaction ${txid} has a malformed TransferContract`);
  }
  return { to: tronAddressFromHex(value.to_address), amountSun };
}
