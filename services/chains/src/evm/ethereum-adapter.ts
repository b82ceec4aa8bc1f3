/**
 * The adapter of one EVM network over JSON-RPC (viem): its native coin (ETH, POL, BNB) as
 * transaction values to watched addresses, its stablecoins as ERC-20 Transfer logs of the
 * configured contracts (decimals from the registry, networks.ts), fetched by block
 * HASH (EIP-234) so a reorg between "block at height h" and "its logs" cannot mix two blocks.
 * Every answer is checked before use: a null block, a block whose hash is not the one asked for,
 * or a log of another block is a ChainSourceError, never an empty result.
 */
import { createPublicClient, http, parseAbiItem, type Block, type Hash, type PublicClient, type TransactionReceipt } from 'viem';
import type { CryptoCode } from '../coin';
import { EVM_NETWORKS, sharedTokenContract, type EvmChain, type EvmNetworkEntry, type EvmTokenCode } from './networks';
import { fromBaseUnits, type Decimal } from '@coinvoice/domain/money';
import { NATIVE_VALUE_INDEX } from '../chain-adapter';
import { ChainSourceError, type BlockRef, type ChainAdapter, type ObservedTransfer, type WatchedAddresses } from '../chain-adapter';

export interface EthereumAdapterOptions {
  /** The network (registry entry): native asset and token decimals. */
  chain: EvmChain;
  rpcUrl: string;
  timeoutMs: number;
  /** Token contracts by asset (0x…), for the tokens the network carries. */
  tokens: Readonly<Partial<Record<EvmTokenCode, string>>>;
}

/** Native coins (ETH, POL, BNB) have 18 decimals on every EVM network. */
const NATIVE_DECIMALS = 18;

const TRANSFER = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)');

type FullBlock = Block<bigint, true, 'latest'>;

/**
 * What a mined transaction cost its sender in fees, in wei: gas used at its effective price, the
 * blob gas of a type-3 transaction, and the L1 data fee OP-stack networks (Base, Optimism) add to
 * the receipt (a hex quantity, viem's generic client leaves it as the node wrote it).
 */
function feeOf(receipt: TransactionReceipt): bigint {
  const l1Fee = (receipt as { l1Fee?: unknown }).l1Fee;
  const l1 = typeof l1Fee === 'bigint' ? l1Fee : typeof l1Fee === 'string' && /^0x[0-9a-f]+$/i.test(l1Fee) ? BigInt(l1Fee) : 0n;
  const blob = receipt.blobGasUsed !== undefined && receipt.blobGasPrice !== undefined ? receipt.blobGasUsed * receipt.blobGasPrice : 0n;
  return receipt.gasUsed * receipt.effectiveGasPrice + blob + l1;
}

export class EthereumAdapter implements ChainAdapter {
  readonly chain: EvmChain;
  readonly assets: readonly CryptoCode[];
  private readonly native: CryptoCode;
  private readonly client: PublicClient;
  private readonly balanceClient: PublicClient;
  /** By lower-case contract: the token and its decimals. */
  private readonly tokenOf: Map<string, { asset: EvmTokenCode; decimals: number }>;
  /** The last full blocks fetched by number, reused by scanBlock (by hash) to save a round trip. */
  private readonly recent = new Map<string, FullBlock>();
  /** What left watched addresses in the last blocks scanned (outflowsOf). */
  private readonly outflowsByBlock = new Map<string, ObservedTransfer[]>();

  constructor(private readonly options: EthereumAdapterOptions) {
    // Blocks and logs go as requests of their own (a block with its transactions is large);
    // balance reads are small and batched.
    this.client = createPublicClient({ transport: http(options.rpcUrl, { timeout: options.timeoutMs, retryCount: 0 }) });
    this.balanceClient = createPublicClient({
      transport: http(options.rpcUrl, { timeout: options.timeoutMs, retryCount: 0, batch: { batchSize: 200, wait: 0 } }),
    });
    const network: EvmNetworkEntry = EVM_NETWORKS[options.chain];
    this.chain = options.chain;
    this.native = network.native.code;
    // One contract as two tokens would report one stablecoin's transfers as the other's.
    const shared = sharedTokenContract(options);
    if (shared) throw new Error(shared);
    this.tokenOf = new Map();
    for (const [asset, contract] of Object.entries(options.tokens) as Array<[EvmTokenCode, string]>) {
      const entry = network.tokens[asset];
      if (!entry) throw new Error(`${options.chain} carries no ${asset}`);
      this.tokenOf.set(contract.toLowerCase(), { asset, decimals: entry.decimals });
    }
    this.assets = [this.native, ...Array.from(this.tokenOf.values(), (t) => t.asset)];
  }

  /** The node's EIP-155 chain id (`eth_chainId`): the watcher's start-up check. */
  async chainId(): Promise<number> {
    return this.call('eth_chainId', () => this.client.getChainId());
  }

  /**
   * A token contract's `decimals()` as the node answers it, or null when no contract is deployed
   * at that address on this node. The watcher's start-up check compares it with the registry (and
   * refuses a missing contract on a main-chain node: family.ts verifyEvmNode).
   */
  async tokenDecimals(contract: string): Promise<number | null> {
    const code = await this.call(`eth_getCode(${contract})`, () => this.client.getCode({ address: contract as `0x${string}` }));
    if (code === undefined || code === '0x') return null;
    const decimals = await this.call(`decimals() of ${contract}`, () =>
      this.client.readContract({ address: contract as `0x${string}`, abi: [parseAbiItem('function decimals() view returns (uint8)')], functionName: 'decimals' }),
    );
    return Number(decimals);
  }

  async head(): Promise<BlockRef> {
    const block = await this.call('eth_getBlockByNumber(latest)', () => this.client.getBlock({ blockTag: 'latest' }));
    return blockRef(block, 'latest');
  }

  async blockAt(height: number): Promise<BlockRef | null> {
    const block = await this.call(`eth_getBlockByNumber(${height})`, async () => {
      try {
        return await this.client.getBlock({ blockNumber: BigInt(height), includeTransactions: true });
      } catch (err) {
        // viem throws BlockNotFoundError for a `null` answer: past the head, or a node that lost it.
        if (err instanceof Error && err.name === 'BlockNotFoundError') return null;
        throw err;
      }
    });
    if (block === null) return null;
    const ref = blockRef(block, `height ${height}`);
    if (ref.height !== height) throw new ChainSourceError('malformed', `asked for block ${height}, got ${ref.height}`);
    this.remember(block);
    return ref;
  }

  /**
   * The block's cost, not the watched set's: its transactions (fetched anyway) and every Transfer
   * log of the configured tokens in it (one eth_getLogs by block hash, no recipient filter), both
   * matched in memory against the watched addresses (docs/watcher.md, "Cost per block").
   */
  async scanBlock(block: BlockRef, addresses: WatchedAddresses): Promise<ObservedTransfer[]> {
    return (await this.scan(block, addresses)).transfers;
  }

  /**
   * What left watched addresses in this block (docs/watcher.md#what-left-an-address): from the
   * same scan as scanBlock's (kept for the last 64 blocks scanned), so no call of its own.
   */
  async outflowsOf(block: BlockRef, addresses: WatchedAddresses): Promise<ObservedTransfer[]> {
    return this.outflowsByBlock.get(block.hash) ?? (await this.scan(block, addresses)).outflows;
  }

  private async scan(block: BlockRef, addresses: WatchedAddresses): Promise<{ transfers: ObservedTransfer[]; outflows: ObservedTransfer[] }> {
    if (addresses.size === 0) return { transfers: [], outflows: [] };
    const full = this.recent.get(block.hash) ?? (await this.blockByHash(block.hash));
    const transfers: ObservedTransfer[] = [];
    const outflows: ObservedTransfer[] = [];
    for (const tx of full.transactions) {
      if (typeof tx !== 'object') continue;
      // Asked once per transaction, and only of one that concerns a watched address.
      let receipt: TransactionReceipt | undefined;
      const receiptOf = async () => (receipt ??= await this.receipt(tx.hash, block));
      const spender = addresses.lookup(tx.from);
      if (spender) {
        // A transaction sent from a watched address (a sweep): its value unless it reverted, and
        // its fee in any case. One receipt per such transaction: the cost of a spend, not of the block.
        const spend = await receiptOf();
        const spent = (spend.status === 'success' ? tx.value : 0n) + feeOf(spend);
        if (spent > 0n) outflows.push({ transactionHash: tx.hash, outputIndex: NATIVE_VALUE_INDEX, address: spender, asset: this.native, amount: fromBaseUnits(spent, NATIVE_DECIMALS), block });
      }
      if (tx.to === null || tx.value === 0n) continue;
      const address = addresses.lookup(tx.to);
      if (!address) continue;
      // A reverted transaction moves no value, though the block lists it with one (an address
      // with code, e.g. an EIP-7702 delegation, can revert what it is sent). One receipt per
      // transaction to a watched address: the cost of a payment, not of the block.
      if ((await receiptOf()).status !== 'success') continue;
      transfers.push({
        transactionHash: tx.hash,
        outputIndex: NATIVE_VALUE_INDEX,
        address,
        asset: this.native,
        amount: fromBaseUnits(tx.value, NATIVE_DECIMALS),
        block,
        sender: tx.from.toLowerCase(),
      });
    }
    const logs = await this.call(`eth_getLogs(blockHash ${block.hash})`, () =>
      this.client.getLogs({ blockHash: block.hash as Hash, address: [...this.tokenOf.keys()] as `0x${string}`[], event: TRANSFER, strict: true }),
    );
    for (const log of logs) {
      if (log.blockHash !== block.hash || log.removed) {
        throw new ChainSourceError('malformed', `a log of block ${log.blockHash} answered a query for ${block.hash}`);
      }
      const token = this.tokenOf.get(log.address.toLowerCase());
      if (!token || log.args.value === 0n) continue;
      if (log.logIndex === null || log.transactionHash === null) throw new ChainSourceError('malformed', 'a mined log without index or hash');
      const spender = addresses.lookup(log.args.from);
      if (spender) outflows.push({ transactionHash: log.transactionHash, outputIndex: log.logIndex, address: spender, asset: token.asset, amount: fromBaseUnits(log.args.value, token.decimals), block });
      const address = addresses.lookup(log.args.to);
      if (!address) continue;
      transfers.push({
        transactionHash: log.transactionHash,
        outputIndex: log.logIndex,
        address,
        asset: token.asset,
        amount: fromBaseUnits(log.args.value, token.decimals),
        block,
        sender: log.args.from.toLowerCase(),
      });
    }
    this.outflowsByBlock.set(block.hash, outflows);
    if (this.outflowsByBlock.size > 64) this.outflowsByBlock.delete(this.outflowsByBlock.keys().next().value!);
    return { transfers, outflows };
  }

  /** The receipt of a transaction mined in `block` (its status, gas used and price). */
  private async receipt(hash: Hash, block: BlockRef): Promise<TransactionReceipt> {
    const receipt = await this.call(`eth_getTransactionReceipt(${hash})`, () => this.client.getTransactionReceipt({ hash }));
    if (receipt.blockHash !== block.hash) {
      throw new ChainSourceError('malformed', `the receipt of ${hash} names block ${receipt.blockHash}, not ${block.hash} (a reorg under the scan)`);
    }
    return receipt;
  }

  async balancesAt(asset: CryptoCode, addresses: readonly string[], block: BlockRef): Promise<Map<string, Decimal>> {
    const balances = new Map<string, Decimal>();
    const contract = [...this.tokenOf].find(([, token]) => token.asset === asset)?.[0];
    if (asset !== this.native && contract === undefined) throw new Error(`${this.chain}: ${asset} is not an asset of this chain`);
    const decimals = contract === undefined ? NATIVE_DECIMALS : this.tokenOf.get(contract)!.decimals;
    // Concurrent calls, sent as JSON-RPC batches by balanceClient (a thousand addresses cost a
    // handful of HTTP requests, not a thousand round trips).
    const read = async (address: string) => {
      const raw = await this.call(`balance of ${address}`, () =>
        contract === undefined
          ? this.balanceClient.getBalance({ address: address as `0x${string}`, blockNumber: BigInt(block.height) })
          : this.balanceClient.readContract({
              address: contract as `0x${string}`,
              abi: [parseAbiItem('function balanceOf(address) view returns (uint256)')],
              functionName: 'balanceOf',
              args: [address as `0x${string}`],
              blockNumber: BigInt(block.height),
            }),
      );
      balances.set(address, fromBaseUnits(raw, decimals));
    };
    for (let i = 0; i < addresses.length; i += 500) await Promise.all(addresses.slice(i, i + 500).map(read));
    return balances;
  }

  private async blockByHash(hash: string): Promise<FullBlock> {
    const block = await this.call(`eth_getBlockByHash(${hash})`, async () => {
      try {
        return await this.client.getBlock({ blockHash: hash as Hash, includeTransactions: true });
      } catch (err) {
        if (err instanceof Error && err.name === 'BlockNotFoundError') return null;
        throw err;
      }
    });
    if (block === null) throw new ChainSourceError('missing_block', `block ${hash} is no longer known to the node`);
    if (block.hash !== hash) throw new ChainSourceError('malformed', `asked for block ${hash}, got ${block.hash}`);
    return block;
  }

  private remember(block: FullBlock): void {
    if (block.hash === null) return;
    this.recent.set(block.hash, block);
    if (this.recent.size > 64) this.recent.delete(this.recent.keys().next().value!);
  }

  /** Runs one RPC call, turning transport failures into ChainSourceErrors. */
  private async call<T>(what: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      if (err instanceof ChainSourceError) throw err;
      const name = err instanceof Error ? err.name : '';
      const kind =
        name === 'TimeoutError' ? 'timeout' : name === 'HttpRequestError' ? 'unavailable' : /Rpc|Resource|Internal/.test(name) ? 'rpc_error' : 'malformed';
      throw new ChainSourceError(kind, `${what}: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`, { cause: err });
    }
  }
}

function blockRef(block: { number: bigint | null; hash: Hash | null; parentHash: Hash; timestamp: bigint } | null, what: string): BlockRef {
  if (!block || block.number === null || block.hash === null) throw new ChainSourceError('malformed', `block ${what}: null or pending block`);
  return { height: Number(block.number), hash: block.hash, parentHash: block.parentHash, time: new Date(Number(block.timestamp) * 1000) };
}
