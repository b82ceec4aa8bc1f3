/**
 * The on-chain check of payouts on one EVM network (../payout-check.ts): the native coin as the
 * transaction's value, USDT/USDC as a `Transfer` log of the configured contract, exactly the
 * payout's amount (in its registry entry's base units) to its destination.
 * Plain JSON-RPC over fetch: two read calls, no library.
 */
import { fetchJson, formatUnits, isRecord, mismatch, notMined, payoutBaseUnits, ChainUnavailable, failedOnChain, type ChainCheckInput, type ChainCheckResult, type PayoutChainCheck } from '../payout-check';

export interface EthereumCheckSettings {
  rpcUrl: string;
  timeoutMs: number;
  /** ERC-20 contract per token code (USDT, USDC): the node's network, not necessarily mainnet. */
  contracts: Readonly<Record<string, string>>;
  /** The network's name in reasons ("Ethereum", "BNB Smart Chain"); default "Ethereum". */
  label?: string;
}

/** keccak256("Transfer(address,address,uint256)"). */
const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

interface RpcTransaction {
  to: string | null;
  value: string;
}
interface RpcLog {
  address: string;
  topics: string[];
  data: string;
}
interface RpcReceipt {
  status: string;
  logs: RpcLog[];
}

export class EthereumPayoutCheck implements PayoutChainCheck {
  private nextId = 1;

  constructor(private readonly settings: EthereumCheckSettings) {}

  async check(input: ChainCheckInput): Promise<ChainCheckResult> {
    const [tx, receipt] = await Promise.all([
      this.call<RpcTransaction | null>('eth_getTransactionByHash', [input.transactionHash]),
      this.call<RpcReceipt | null>('eth_getTransactionReceipt', [input.transactionHash]),
    ]);
    if (!tx || !receipt) return notMined(this.settings.label ?? 'Ethereum');
    if (receipt.status !== '0x1') return failedOnChain('reverted');
    const baseUnits = payoutBaseUnits(input);
    const destination = input.address.toLowerCase();
    const token = input.coin.token;
    if (!token) {
      if (tx.to?.toLowerCase() === destination && BigInt(tx.value) === baseUnits) return { ok: true };
      return mismatch(`this transaction sends ${formatUnits(BigInt(tx.value), input.coin)} ${input.coin.code} to ${tx.to ?? 'a new contract'}, not ${input.amount} ${input.coin.code} to ${input.address}`);
    }
    const contract = this.settings.contracts[input.coin.code]?.toLowerCase();
    if (!contract) throw new Error(`no contract configured for ${input.coin.code}`);
    const pays = receipt.logs.some(
      (log) =>
        log.address.toLowerCase() === contract &&
        log.topics[0]?.toLowerCase() === TRANSFER_TOPIC &&
        topicAddress(log.topics[2]) === destination &&
        log.data !== '0x' &&
        BigInt(log.data) === baseUnits,
    );
    if (pays) return { ok: true };
    return mismatch(`this transaction has no ${input.coin.code} transfer of ${input.amount} to ${input.address}`);
  }

  private async call<T>(method: string, params: unknown[]): Promise<T> {
    const body = await fetchJson(this.settings.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: this.nextId++, method, params }),
      timeoutMs: this.settings.timeoutMs,
    });
    if (!isRecord(body) || (body.error !== undefined && body.error !== null) || !('result' in body)) {
      const error = isRecord(body) && isRecord(body.error) && typeof body.error.message === 'string' ? body.error.message : 'malformed JSON-RPC answer';
      throw new ChainUnavailable(error);
    }
    return body.result as T;
  }
}

/** The address in a 32-byte log topic (left-padded), lower case. */
function topicAddress(topic: string | undefined): string | undefined {
  return topic && /^0x[0-9a-fA-F]{64}$/.test(topic) ? `0x${topic.slice(26).toLowerCase()}` : undefined;
}
