/**
 * With a chain node configured, an operator's Complete is checked on chain (services/payout/README.md
 * "Claim before sending"): the transaction must be mined, must have succeeded, and must pay the
 * payout's destination exactly the payout's amount — ETH as the transaction's value, USDT/USDC as a
 * `Transfer` log of the configured contract. An operator who pastes the wrong hash (or the hash of
 * another payout, or of a smaller transfer) is told so instead of debiting the balance.
 *
 * Only Ethereum has a node setting today (CHAIN_ETHEREUM_RPC_URL); payouts on other chains are not
 * checked. Plain JSON-RPC over fetch: two read calls, no library.
 */
import { Code } from '@connectrpc/connect';
import { Decimal, type CryptoCurrency } from '@coinvoice/runtime/coins';

export interface ChainCheckInput {
  /** Lower-case, in the chain's format (checked before). */
  transactionHash: string;
  coin: CryptoCurrency;
  /** The payout's destination and amount (decimal string in the coin's units). */
  address: string;
  amount: string;
}

export type ChainCheckResult = { ok: true } | { ok: false; code: string; reason: string; connectCode: Code };

export interface PayoutChainCheck {
  check(input: ChainCheckInput): Promise<ChainCheckResult>;
}

export interface EthereumCheckSettings {
  rpcUrl: string;
  timeoutMs: number;
  /** ERC-20 contract per token code (USDT, USDC): the node's network, not necessarily mainnet. */
  contracts: Readonly<Record<string, string>>;
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

class ChainUnavailable extends Error {}

export class EthereumPayoutCheck implements PayoutChainCheck {
  private nextId = 1;

  constructor(private readonly settings: EthereumCheckSettings) {}

  async check(input: ChainCheckInput): Promise<ChainCheckResult> {
    if (input.coin.chain !== 'ethereum') return { ok: true };
    try {
      return await this.checkEthereum(input);
    } catch (err) {
      if (err instanceof ChainUnavailable) {
        return { ok: false, code: 'chain_unavailable', reason: `the Ethereum node could not be asked (${err.message}); try again shortly`, connectCode: Code.Unavailable };
      }
      throw err;
    }
  }

  private async checkEthereum(input: ChainCheckInput): Promise<ChainCheckResult> {
    const [tx, receipt] = await Promise.all([
      this.call<RpcTransaction | null>('eth_getTransactionByHash', [input.transactionHash]),
      this.call<RpcReceipt | null>('eth_getTransactionReceipt', [input.transactionHash]),
    ]);
    if (!tx || !receipt) {
      return {
        ok: false,
        code: 'transaction_not_found',
        reason: 'the Ethereum node knows no mined transaction with this hash: complete the payout once its transaction is mined',
        connectCode: Code.FailedPrecondition,
      };
    }
    if (receipt.status !== '0x1') {
      return { ok: false, code: 'transaction_failed', reason: 'this transaction failed on chain (reverted): it sent nothing', connectCode: Code.FailedPrecondition };
    }
    const baseUnits = BigInt(new Decimal(input.amount).times(new Decimal(10).pow(input.coin.baseUnitDecimals)).toFixed(0));
    const destination = input.address.toLowerCase();
    const token = input.coin.token;
    if (!token) {
      if (tx.to?.toLowerCase() === destination && BigInt(tx.value) === baseUnits) return { ok: true };
      return mismatch(`this transaction sends ${formatUnits(BigInt(tx.value), input.coin)} ETH to ${tx.to ?? 'a new contract'}, not ${input.amount} ETH to ${input.address}`);
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
    let res: Response;
    try {
      res = await fetch(this.settings.rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: this.nextId++, method, params }),
        signal: AbortSignal.timeout(this.settings.timeoutMs),
      });
    } catch (err) {
      throw new ChainUnavailable(err instanceof Error ? err.message : String(err));
    }
    if (!res.ok) throw new ChainUnavailable(`HTTP ${res.status}`);
    const body = (await res.json().catch(() => undefined)) as { result?: T; error?: { message?: string } } | undefined;
    if (!body || body.error || !('result' in body)) throw new ChainUnavailable(body?.error?.message ?? 'malformed JSON-RPC answer');
    return body.result as T;
  }
}

function mismatch(reason: string): ChainCheckResult {
  return { ok: false, code: 'transaction_mismatch', reason, connectCode: Code.FailedPrecondition };
}

/** The address in a 32-byte log topic (left-padded), lower case. */
function topicAddress(topic: string | undefined): string | undefined {
  return topic && /^0x[0-9a-fA-F]{64}$/.test(topic) ? `0x${topic.slice(26).toLowerCase()}` : undefined;
}

function formatUnits(value: bigint, coin: CryptoCurrency): string {
  return new Decimal(value.toString()).div(new Decimal(10).pow(coin.baseUnitDecimals)).toFixed();
}
