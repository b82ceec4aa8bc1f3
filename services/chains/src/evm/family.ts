/**
 * The EVM family: Ether and the ERC-20 tokens USDT and USDC on Ethereum. EIP-55 addresses from
 * BIP44 account keys, EIP-681 payment URIs, one JSON-RPC node for the watcher (blocks by hash,
 * Transfer logs) and for the payout service's check of a Complete, and the confirmation policy
 * (docs/architecture.md#live-payments).
 */
import { setting, type Setting } from '@coinvoice/runtime';
import { toBaseUnits } from '@coinvoice/domain/money';
import type { ChainFamily } from '../family';
import { optionalNodeUrl } from '../node-settings';
import { eip55Address, validateEip55Address } from './address';
import { ETH, EVM_CHAIN_ID, USDC, USDT } from './coins';
import type * as EthereumModule from './ethereum-adapter';
import { EthereumPayoutCheck } from './payout-check';

/* The adapter and viem load only when a watcher builds one: viem alone adds ~30 MB to a process. */
const ethereumModule = (): typeof EthereumModule => require('./ethereum-adapter');

/** An EVM contract address (0x + 40 hex); compared case-insensitively. */
function contractSetting(defaultContract: string): Setting<string> {
  return {
    expected: 'an ERC-20 contract address (0x followed by 40 hex digits)',
    default: defaultContract,
    parse: (raw) => (/^0x[0-9a-fA-F]{40}$/.test(raw) ? raw : undefined),
  };
}

/**
 * The Ethereum node, as both the invoice watcher and the payout service read it. An empty RPC URL
 * means "not configured": no watcher (`watch ethereum` refuses to start), no payout check.
 */
export const evmNodeSettings = {
  CHAIN_ETHEREUM_RPC_URL: optionalNodeUrl(),
  /** Timeout of one JSON-RPC call. */
  CHAIN_ETHEREUM_RPC_TIMEOUT_MS: setting.int({ default: 10_000, min: 100, max: 120_000 }),
  CHAIN_ETHEREUM_USDT_CONTRACT: contractSetting(USDT.token!.contract.mainnet),
  CHAIN_ETHEREUM_USDC_CONTRACT: contractSetting(USDC.token!.contract.mainnet),
} as const;

/**
 * The watcher's Ethereum settings. The serve role reads CHAIN_ETHEREUM_CONFIRMATIONS too: each
 * invoice fixes its confirmation count at creation.
 */
const evmWatcherSettings = {
  CHAIN_ETHEREUM_RPC_URL: evmNodeSettings.CHAIN_ETHEREUM_RPC_URL,
  CHAIN_ETHEREUM_CONFIRMATIONS: setting.int({ default: 12, min: 1, max: 1_000 }),
  CHAIN_ETHEREUM_USDT_CONTRACT: evmNodeSettings.CHAIN_ETHEREUM_USDT_CONTRACT,
  CHAIN_ETHEREUM_USDC_CONTRACT: evmNodeSettings.CHAIN_ETHEREUM_USDC_CONTRACT,
  CHAIN_ETHEREUM_POLL_MS: setting.int({ default: 2_000, min: 10, max: 600_000 }),
  CHAIN_ETHEREUM_RPC_TIMEOUT_MS: evmNodeSettings.CHAIN_ETHEREUM_RPC_TIMEOUT_MS,
  /** Blocks written per database transaction while backfilling. */
  CHAIN_ETHEREUM_BATCH_BLOCKS: setting.int({ default: 50, min: 1, max: 1_000 }),
} as const;

export const evmFamily: ChainFamily<typeof evmWatcherSettings, typeof evmNodeSettings> = {
  name: 'evm',
  defaultConfirmations: { ethereum: 12 },
  currencies: [ETH, USDT, USDC],
  compressedKeys: false,
  encodeAddress: (publicKey) => eip55Address(publicKey),
  validateAddress: (address) => validateEip55Address(address),
  /**
   * EIP-681: `ethereum:<address>[@chainId]?value=<wei>`, for a token
   * `ethereum:<tokenContract>[@chainId]/transfer?address=<address>&uint256=<token base units>`. The
   * chain id is written for testnet only: without one a wallet uses its current chain, which for
   * mainnet is the common case, while a Sepolia payment must never be sent on mainnet.
   */
  paymentUri(currency, network, address, amount) {
    const chain = network === 'testnet' ? `@${EVM_CHAIN_ID.testnet}` : '';
    const baseUnits = toBaseUnits(amount, currency.baseUnitDecimals).toString();
    if (currency.token) return `ethereum:${currency.token.contract[network]}${chain}/transfer?address=${address}&uint256=${baseUnits}`;
    return `ethereum:${address}${chain}?value=${baseUnits}`;
  },
  watcherSettings: evmWatcherSettings,
  sources: (config) => ({
    ethereum: {
      sourceVariable: 'CHAIN_ETHEREUM_RPC_URL',
      adapter: () =>
        config.CHAIN_ETHEREUM_RPC_URL === ''
          ? null
          : new (ethereumModule().EthereumAdapter)({
              rpcUrl: config.CHAIN_ETHEREUM_RPC_URL,
              timeoutMs: config.CHAIN_ETHEREUM_RPC_TIMEOUT_MS,
              tokens: { USDT: config.CHAIN_ETHEREUM_USDT_CONTRACT, USDC: config.CHAIN_ETHEREUM_USDC_CONTRACT },
            }),
      pollMs: config.CHAIN_ETHEREUM_POLL_MS,
      batchBlocks: config.CHAIN_ETHEREUM_BATCH_BLOCKS,
      confirmations: config.CHAIN_ETHEREUM_CONFIRMATIONS,
    },
  }),
  payoutSettings: evmNodeSettings,
  payoutChecks: (config) =>
    config.CHAIN_ETHEREUM_RPC_URL === ''
      ? {}
      : {
          ethereum: new EthereumPayoutCheck({
            rpcUrl: config.CHAIN_ETHEREUM_RPC_URL,
            timeoutMs: config.CHAIN_ETHEREUM_RPC_TIMEOUT_MS,
            contracts: { USDT: config.CHAIN_ETHEREUM_USDT_CONTRACT, USDC: config.CHAIN_ETHEREUM_USDC_CONTRACT },
          }),
        },
};
