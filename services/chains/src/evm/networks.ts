/**
 * The EVM network registry (docs/networks.md): every EVM network coinvoice takes payments on is one
 * entry here: its chain ids, native asset, the issuers' stablecoin contracts with their decimals,
 * its default confirmations (with the source they follow) and its block time. The settings
 * (`CHAIN_<NETWORK>_…`), the coins, the watcher and `GET /api/currencies` all come from the entry,
 * so adding an EVM network is adding an entry and its test.
 */

export const EVM_CHAINS = ['ethereum', 'base', 'arbitrum', 'optimism', 'polygon', 'bsc'] as const;
export type EvmChain = (typeof EVM_CHAINS)[number];

/** The stablecoins an EVM network may carry (tokens of one asset code each). */
export type EvmTokenCode = 'USDT' | 'USDC';

export interface EvmTokenEntry {
  /** The issuer's contract (EIP-55) on the main chain. */
  readonly mainnet: string;
  /** The issuer's contract on the network's test chain, null where it has none. */
  readonly testnet: string | null;
  /** `decimals()` of the contract: 6, but 18 for the Binance-Peg tokens on bsc. */
  readonly decimals: number;
  /** How the issuer names it on this network (shown on the checkout page). */
  readonly name: string;
}

export interface EvmNetworkEntry {
  readonly chain: EvmChain;
  /** Shown to customers: "Base", "BNB Smart Chain"… */
  readonly label: string;
  /** EIP-155 chain ids: the main chain, and the test chain sandbox invoices are addressed on. */
  readonly chainId: { readonly mainnet: number; readonly testnet: number };
  /** The network's own coin (gas): ETH on ethereum and its rollups, POL on polygon, BNB on bsc. */
  readonly native: { readonly code: 'ETH' | 'POL' | 'BNB'; readonly name: string };
  readonly tokens: Readonly<Partial<Record<EvmTokenCode, EvmTokenEntry>>>;
  /** Confirmations a live invoice needs by default (`CHAIN_<NETWORK>_CONFIRMATIONS` overrides). */
  readonly confirmations: number;
  /** Why that many: the source it follows (docs/networks.md cites it in full). */
  readonly confirmationsSource: string;
  /** The chain's block interval, for the default poll interval and the watcher benchmark. */
  readonly blockTimeMs: number;
}

export const EVM_NETWORKS = {
  ethereum: {
    chain: 'ethereum',
    label: 'Ethereum',
    chainId: { mainnet: 1, testnet: 11155111 },
    native: { code: 'ETH', name: 'Ether' },
    tokens: {
      // Tether has no official Sepolia deployment; the testnet entry is Aave's widely used Sepolia USDT faucet token.
      USDT: { mainnet: '0xdAC17F958D2ee523a2206206994597C13D831ec7', testnet: '0xaA8E23Fb1079EA71e0a56F48a2aA51851D8433D0', decimals: 6, name: 'Tether USD (ERC-20)' },
      USDC: { mainnet: '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48', testnet: '0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238', decimals: 6, name: 'USD Coin (ERC-20)' },
    },
    confirmations: 12,
    confirmationsSource: 'coinvoice has waited 12 blocks on Ethereum since its first release (docs/architecture.md#live-payments)',
    blockTimeMs: 12_000,
  },
  base: {
    chain: 'base',
    label: 'Base',
    chainId: { mainnet: 8453, testnet: 84532 },
    native: { code: 'ETH', name: 'Ether on Base' },
    tokens: {
      USDC: { mainnet: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', testnet: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', decimals: 6, name: 'USD Coin on Base' },
    },
    confirmations: 10,
    confirmationsSource: "Hyperlane's validator reorg period for Base: 10 blocks (~20 s), @hyperlane-xyz/registry chains/base/metadata.yaml blocks.reorgPeriod (docs/networks.md#sources)",
    blockTimeMs: 2_000,
  },
  arbitrum: {
    chain: 'arbitrum',
    label: 'Arbitrum One',
    chainId: { mainnet: 42161, testnet: 421614 },
    native: { code: 'ETH', name: 'Ether on Arbitrum One' },
    tokens: {
      USDT: { mainnet: '0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9', testnet: null, decimals: 6, name: 'Tether USD on Arbitrum One' },
      USDC: { mainnet: '0xaf88d065e77c8cC2239327C5EDb3A432268e5831', testnet: '0x75faf114eafb1BDbe2F0316DF893fd58CE46AA4d', decimals: 6, name: 'USD Coin on Arbitrum One' },
    },
    confirmations: 30,
    confirmationsSource: "Cryptopay's published deposit confirmations for Arbitrum: 30 (developers.cryptopay.me/guides/confirmations; docs/networks.md#sources)",
    blockTimeMs: 250,
  },
  optimism: {
    chain: 'optimism',
    label: 'OP Mainnet',
    chainId: { mainnet: 10, testnet: 11155420 },
    native: { code: 'ETH', name: 'Ether on OP Mainnet' },
    tokens: {
      USDT: { mainnet: '0x94b008aA00579c1307B0EF2c499aD98a8ce58e58', testnet: null, decimals: 6, name: 'Tether USD on OP Mainnet' },
      USDC: { mainnet: '0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85', testnet: '0x5fd84259d66Cd46123540766Be93DFE6D43130D7', decimals: 6, name: 'USD Coin on OP Mainnet' },
    },
    confirmations: 10,
    confirmationsSource: "Hyperlane's validator reorg period for OP Mainnet: 10 blocks (~20 s), @hyperlane-xyz/registry chains/optimism/metadata.yaml blocks.reorgPeriod (docs/networks.md#sources)",
    blockTimeMs: 2_000,
  },
  polygon: {
    chain: 'polygon',
    label: 'Polygon PoS',
    chainId: { mainnet: 137, testnet: 80002 },
    native: { code: 'POL', name: 'POL' },
    tokens: {
      USDT: { mainnet: '0xc2132D05D31c914a87C6611C10748AEb04B58e8F', testnet: null, decimals: 6, name: 'Tether USD on Polygon PoS' },
      USDC: { mainnet: '0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359', testnet: '0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582', decimals: 6, name: 'USD Coin on Polygon PoS' },
    },
    confirmations: 127,
    confirmationsSource: "Cryptopay's published deposit confirmations for Polygon: 127 (developers.cryptopay.me/guides/confirmations; docs/networks.md#sources)",
    blockTimeMs: 2_000,
  },
  bsc: {
    chain: 'bsc',
    label: 'BNB Smart Chain',
    chainId: { mainnet: 56, testnet: 97 },
    native: { code: 'BNB', name: 'BNB' },
    tokens: {
      USDT: { mainnet: '0x55d398326f99059fF775485246999027B3197955', testnet: null, decimals: 18, name: 'Tether USD (BEP-20)' },
      USDC: { mainnet: '0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d', testnet: null, decimals: 18, name: 'USD Coin (BEP-20)' },
    },
    confirmations: 15,
    confirmationsSource: "Cryptopay's published deposit confirmations for BNB and all BEP-20 coins: 15 (developers.cryptopay.me/guides/confirmations; docs/networks.md#sources)",
    blockTimeMs: 750,
  },
} as const satisfies Readonly<Record<EvmChain, EvmNetworkEntry>>;

/** The stablecoins `chain` carries, as a type (`CHAIN_BASE_USDT_CONTRACT` does not exist). */
export type TokensOf<C extends EvmChain> = keyof (typeof EVM_NETWORKS)[C]['tokens'] & EvmTokenCode;

export function isEvmChain(chain: string): chain is EvmChain {
  return (EVM_CHAINS as readonly string[]).includes(chain);
}

/** `CHAIN_<NETWORK>_`: the prefix of a network's settings. */
export function settingPrefix(chain: string): string {
  return `CHAIN_${chain.toUpperCase()}_`;
}

/**
 * Two of the network's tokens configured with one contract (compared case-insensitively), as one
 * line naming both variables; undefined when every token has its own.
 */
export function sharedTokenContract(node: { readonly chain: EvmChain; readonly tokens: Readonly<Partial<Record<EvmTokenCode, string>>> }): string | undefined {
  const prefix = settingPrefix(node.chain);
  const seen = new Map<string, EvmTokenCode>();
  for (const [code, contract] of Object.entries(node.tokens) as Array<[EvmTokenCode, string]>) {
    const other = seen.get(contract.toLowerCase());
    if (other) return `${prefix}${other}_CONTRACT and ${prefix}${code}_CONTRACT are one contract (${contract}): each token needs its own`;
    seen.set(contract.toLowerCase(), code);
  }
  return undefined;
}
