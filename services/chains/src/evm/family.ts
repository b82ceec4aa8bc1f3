/**
 * The EVM family: every network of the registry (networks.ts) — Ethereum, Base, Arbitrum One, OP
 * Mainnet, Polygon PoS, BNB Smart Chain — with its native coin and stablecoins. EIP-55 addresses
 * from BIP44 account keys (one address is the same on every EVM network), EIP-681 payment URIs,
 * one JSON-RPC node per network for its watcher and payout check, and each network's confirmation
 * policy (docs/networks.md). The settings are generated from the registry:
 * `CHAIN_<NETWORK>_RPC_URL`, `_RPC_TIMEOUT_MS`, `_CHAIN_ID`, `_CONFIRMATIONS`, `_POLL_MS`,
 * `_BATCH_BLOCKS`, and `_USDT_CONTRACT` / `_USDC_CONTRACT` for the tokens the network carries.
 */
import { ConfigError, setting, type ConfigOf, type Setting } from '@coinvoice/runtime';
import { toBaseUnits } from '@coinvoice/domain/money';
import { ChainSourceRefusal, type ChainFamily, type ChainSource } from '../family';
import { optionalNodeUrl } from '../node-settings';
import { eip55Address, validateEip55Address } from './address';
import { EVM_PAY_METHODS } from './coins';
import { EVM_CHAINS, EVM_NETWORKS, isEvmChain, settingPrefix, sharedTokenContract, type EvmChain, type EvmNetworkEntry, type EvmTokenCode, type TokensOf } from './networks';
import type * as EthereumModule from './ethereum-adapter';
import { EthereumPayoutCheck } from './payout-check';

/* The adapter and viem load only when a watcher builds one: viem alone adds ~30 MB to a process. */
const ethereumModule = (): typeof EthereumModule => require('./ethereum-adapter');

type Upper<C extends string> = Uppercase<C>;
type NodeStringKey = `CHAIN_${Upper<EvmChain>}_RPC_URL`;
type NodeNumberKey = `CHAIN_${Upper<EvmChain>}_${'RPC_TIMEOUT_MS' | 'CHAIN_ID'}`;
type TokenKey = { [C in EvmChain]: `CHAIN_${Upper<C>}_${TokensOf<C>}_CONTRACT` }[EvmChain];
type WatcherNumberKey = `CHAIN_${Upper<EvmChain>}_${'CONFIRMATIONS' | 'POLL_MS' | 'BATCH_BLOCKS'}`;

/** The nodes' settings (both the invoice watchers and the payout service read them). */
export type EvmNodeSettings = Record<NodeStringKey | TokenKey, Setting<string>> & Record<NodeNumberKey, Setting<number>>;
export type EvmWatcherSettings = EvmNodeSettings & Record<WatcherNumberKey, Setting<number>>;

/** An EVM contract address (0x + 40 hex); compared case-insensitively. */
function contractSetting(defaultContract: string): Setting<string> {
  return {
    expected: 'an ERC-20 contract address (0x followed by 40 hex digits)',
    default: defaultContract,
    parse: (raw) => (/^0x[0-9a-fA-F]{40}$/.test(raw) ? raw : undefined),
  };
}

function nodeSettingsOf(chain: EvmChain): Record<string, Setting<unknown>> {
  const entry: EvmNetworkEntry = EVM_NETWORKS[chain];
  const prefix = settingPrefix(chain);
  const settings: Record<string, Setting<unknown>> = {
    // Empty means "not configured": no watcher (`watch <network>` refuses to start), no payout check.
    [`${prefix}RPC_URL`]: optionalNodeUrl(),
    /** Timeout of one JSON-RPC call. */
    [`${prefix}RPC_TIMEOUT_MS`]: setting.int({ default: 10_000, min: 100, max: 120_000 }),
    /** The node's `eth_chainId` must equal it (a watcher refuses to start otherwise). */
    [`${prefix}CHAIN_ID`]: setting.int({ default: entry.chainId.mainnet, min: 1, max: 2 ** 53 - 1 }),
  };
  for (const [code, token] of Object.entries(entry.tokens)) settings[`${prefix}${code}_CONTRACT`] = contractSetting(token.mainnet);
  return settings;
}

function watcherSettingsOf(chain: EvmChain): Record<string, Setting<unknown>> {
  const entry = EVM_NETWORKS[chain];
  const prefix = settingPrefix(chain);
  return {
    ...nodeSettingsOf(chain),
    // The serve role reads _CONFIRMATIONS too: each invoice fixes its confirmation count at creation.
    [`${prefix}CONFIRMATIONS`]: setting.int({ default: entry.confirmations, min: 1, max: 1_000 }),
    [`${prefix}POLL_MS`]: setting.int({ default: Math.min(entry.blockTimeMs, 2_000), min: 10, max: 600_000 }),
    /** Blocks written per database transaction while backfilling. */
    [`${prefix}BATCH_BLOCKS`]: setting.int({ default: 50, min: 1, max: 1_000 }),
  };
}

export const evmNodeSettings = Object.assign({}, ...EVM_CHAINS.map(nodeSettingsOf)) as EvmNodeSettings;
const evmWatcherSettings = Object.assign({}, ...EVM_CHAINS.map(watcherSettingsOf)) as EvmWatcherSettings;

/** One EVM network's node as its configuration names it (the typed view of the generated settings). */
export interface EvmNodeConfig {
  readonly chain: EvmChain;
  /** Empty: not configured. */
  readonly rpcUrl: string;
  readonly timeoutMs: number;
  readonly chainId: number;
  /** The configured contract per stablecoin the network carries (lower case not implied). */
  readonly tokens: Readonly<Partial<Record<EvmTokenCode, string>>>;
}

export interface EvmWatcherConfig extends EvmNodeConfig {
  readonly confirmations: number;
  readonly pollMs: number;
  readonly batchBlocks: number;
}

/** Reads one network's node settings out of a loaded configuration. */
export function evmNodeConfig(config: ConfigOf<EvmNodeSettings>, chain: EvmChain): EvmNodeConfig {
  const values = config as unknown as Readonly<Record<string, string | number | undefined>>;
  const prefix = settingPrefix(chain);
  const tokens: Partial<Record<EvmTokenCode, string>> = {};
  for (const code of Object.keys((EVM_NETWORKS[chain] as EvmNetworkEntry).tokens) as EvmTokenCode[]) tokens[code] = String(values[`${prefix}${code}_CONTRACT`]);
  return {
    chain,
    rpcUrl: String(values[`${prefix}RPC_URL`]),
    timeoutMs: Number(values[`${prefix}RPC_TIMEOUT_MS`]),
    chainId: Number(values[`${prefix}CHAIN_ID`]),
    tokens,
  };
}

/** Reads one network's watcher settings out of a loaded configuration. */
export function evmWatcherConfig(config: ConfigOf<EvmWatcherSettings>, chain: EvmChain): EvmWatcherConfig {
  const values = config as unknown as Readonly<Record<string, number>>;
  const prefix = settingPrefix(chain);
  return {
    ...evmNodeConfig(config, chain),
    confirmations: values[`${prefix}CONFIRMATIONS`]!,
    pollMs: values[`${prefix}POLL_MS`]!,
    batchBlocks: values[`${prefix}BATCH_BLOCKS`]!,
  };
}

/**
 * The watcher's start-up check of one EVM network's node (docs/networks.md#configuration): the
 * node's `eth_chainId` must be `CHAIN_<N>_CHAIN_ID`, each configured token's `decimals()` the
 * registry's, and no two tokens may share one contract — a node of another chain would credit
 * another chain's money, a token of other decimals would scale every amount wrong, and one contract
 * as two tokens would report one stablecoin's payments as the other's. A token address without a
 * contract is refused on a node of the network's main chain id (there the issuer's contract exists:
 * a missing one is a wrong address or a node still syncing, and every payment of that token would go
 * unseen); on any other chain id (a development node such as anvil, without the issuers' contracts)
 * it passes with a warning through `warn` (no Transfer log of it can arrive). Rejects with one line
 * naming the values and variables. A node that gives no answer is asked again (START_CHECK_ATTEMPTS
 * times in all, a second apart) before the check gives up on it.
 */
export async function verifyEvmNode(node: EvmNodeConfig, warn?: (line: string) => void): Promise<void> {
  const prefix = settingPrefix(node.chain);
  const shared = sharedTokenContract(node);
  if (shared) throw new ChainSourceRefusal(shared);
  const adapter = new (ethereumModule().EthereumAdapter)(node);
  const where = `the node at ${prefix}RPC_URL`;
  let chainId: number;
  try {
    chainId = await askPatiently(() => adapter.chainId());
  } catch (err) {
    throw new ChainSourceRefusal(`${where} did not answer eth_chainId (${err instanceof Error ? err.message : String(err)}); ${node.chain} is chain ${node.chainId} (${prefix}CHAIN_ID)`);
  }
  if (chainId !== node.chainId) {
    throw new ChainSourceRefusal(`${where} is chain ${chainId}, but ${node.chain} is chain ${node.chainId} (${prefix}CHAIN_ID)`);
  }
  const entry: EvmNetworkEntry = EVM_NETWORKS[node.chain];
  for (const [code, contract] of Object.entries(node.tokens) as Array<[EvmTokenCode, string]>) {
    const expected = entry.tokens[code]?.decimals;
    if (expected === undefined) continue;
    let decimals: number | null;
    try {
      decimals = await askPatiently(() => adapter.tokenDecimals(contract));
    } catch (err) {
      throw new ChainSourceRefusal(`${where} did not answer decimals() of ${code} ${contract} (${prefix}${code}_CONTRACT): ${err instanceof Error ? err.message : String(err)}`);
    }
    if (decimals === null) {
      const line = `no contract at the ${code} contract ${contract} (${prefix}${code}_CONTRACT) on ${where}`;
      if (node.chainId === entry.chainId.mainnet) {
        throw new ChainSourceRefusal(`${line}, which is ${node.chain}'s main chain ${node.chainId} (${prefix}CHAIN_ID): ${code} payments would go unseen`);
      }
      warn?.(`${line} (chain ${node.chainId}, not ${node.chain}'s main chain): no ${code} payment can be seen`);
      continue;
    }
    if (decimals !== expected) {
      throw new ChainSourceRefusal(
        `the ${code} contract ${contract} (${prefix}${code}_CONTRACT) has ${decimals} decimals on ${where}, but ${code} on ${node.chain} has ${expected} (services/chains/src/evm/networks.ts)`,
      );
    }
  }
}

/** Times the start-up check asks a node that gave no answer, and the pause between two asks. */
export const START_CHECK_ATTEMPTS = 3;
const START_CHECK_PAUSE_MS = 1_000;

/**
 * A question of the start-up check, asked again when the node gave no answer (a timeout, a refused
 * connection, an error reply): a node slow for a moment as the watcher starts — a busy host, a node
 * restarting beside it — must not stop it. A wrong answer is an answer: it is judged at once.
 */
async function askPatiently<T>(ask: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await ask();
    } catch (err) {
      if (attempt >= START_CHECK_ATTEMPTS) throw err;
      await new Promise((resolve) => setTimeout(resolve, START_CHECK_PAUSE_MS));
    }
  }
}

function evmSource(node: EvmWatcherConfig): ChainSource {
  return {
    sourceVariable: `${settingPrefix(node.chain)}RPC_URL`,
    adapter: () => (node.rpcUrl === '' ? null : new (ethereumModule().EthereumAdapter)(node)),
    pollMs: node.pollMs,
    batchBlocks: node.batchBlocks,
    confirmations: node.confirmations,
    // One address is the same on every EVM network: each EVM watcher watches them all.
    watchedNetworks: EVM_CHAINS,
    verify: (warn) => verifyEvmNode(node, warn),
  };
}

export const evmFamily: ChainFamily<EvmWatcherSettings, EvmNodeSettings> = {
  name: 'evm',
  defaultConfirmations: Object.fromEntries(EVM_CHAINS.map((chain) => [chain, EVM_NETWORKS[chain].confirmations])),
  currencies: EVM_PAY_METHODS,
  compressedKeys: false,
  encodeAddress: (publicKey) => eip55Address(publicKey),
  validateAddress: (address) => validateEip55Address(address),
  /**
   * EIP-681: `ethereum:<address>[@chainId]?value=<wei>`, for a token
   * `ethereum:<tokenContract>[@chainId]/transfer?address=<address>&uint256=<token base units>`. The
   * chain id is written for every chain but Ethereum mainnet: without one a wallet uses its current
   * chain, which for Ethereum mainnet is the common case, while a Base or Sepolia payment must never
   * be sent on Ethereum mainnet. A token without a contract (a test chain without the issuer's) gets
   * the plain address form (sandbox invoices are paid by simulation).
   */
  paymentUri(currency, address, amount, target) {
    if (!isEvmChain(currency.chain)) throw new Error(`not an EVM network: ${currency.chain}`);
    if (target.chainId === undefined) throw new Error(`no chain id given for ${currency.code} on ${currency.chain}`);
    const chain = target.chainId === 1 ? '' : `@${target.chainId}`;
    const baseUnits = toBaseUnits(amount, currency.baseUnitDecimals).toString();
    if (currency.token) {
      if (target.contract !== null) return `ethereum:${target.contract}${chain}/transfer?address=${address}&uint256=${baseUnits}`;
      return `ethereum:${address}${chain}`;
    }
    return `ethereum:${address}${chain}?value=${baseUnits}`;
  },
  watcherSettings: evmWatcherSettings,
  sources: (config) => Object.fromEntries(EVM_CHAINS.map((chain) => [chain, evmSource(evmWatcherConfig(config, chain))])),
  payoutSettings: evmNodeSettings,
  /**
   * One check per configured EVM network (its node and token contracts); the payout's network
   * picks it (PayoutChainChecks by the registry entry's chain). Token decimals come from the
   * payout's registry entry (18 for USDT on bsc).
   */
  payoutChecks: (config) =>
    Object.fromEntries(
      EVM_CHAINS.map((chain) => evmNodeConfig(config, chain))
        .filter((node) => node.rpcUrl !== '')
        .map((node) => [
          node.chain,
          new EthereumPayoutCheck({ rpcUrl: node.rpcUrl, timeoutMs: node.timeoutMs, contracts: node.tokens as Record<string, string>, label: EVM_NETWORKS[node.chain].label }),
        ]),
    ),
};

/**
 * Production takes only each EVM network's main chain id (CHAIN_<N>_CHAIN_ID, networks.ts): live
 * invoices are paid and payouts sent on the main chain (an invoice's EIP-681 URI names its id), so a
 * node of a test chain would let free test coins pay invoices, prove payouts or receive signed
 * transactions. Development may name any id (anvil's 31337, a testnet). Every role that reads a
 * `CHAIN_<N>_CHAIN_ID` checks it at start (docs/networks.md#configuration); throws ConfigError.
 */
export function requireMainChainIds(config: { readonly APP_ENV: string }): void {
  if (config.APP_ENV !== 'production') return;
  const values = config as unknown as Readonly<Record<string, unknown>>;
  for (const chain of EVM_CHAINS) {
    const variable = `${settingPrefix(chain)}CHAIN_ID`;
    if (!(variable in values)) continue;
    const main = EVM_NETWORKS[chain].chainId.mainnet;
    if (values[variable] !== main) {
      throw new ConfigError(variable, `${chain}'s main chain id ${main}: APP_ENV=production uses the main chain only (docs/networks.md#configuration)`, String(values[variable]));
    }
  }
}
