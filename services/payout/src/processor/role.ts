/**
 * The `process <network>` role of the payout service (docs/treasury.md#processor):
 * the same image and schema as `serve`; `process ethereum` runs one EvmProcessor (bitcoin and
 * litecoin: utxo/role.ts, tron: tron/role.ts) (plus the runtime's
 * outbox relay for payout.completed / payout.rejected, gRPC health and the admin port for probes
 * and /metrics) instead of the payout API. It holds nothing secret: the signer signs.
 */
import { requireMainChainIds } from '@coinvoice/chains/evm/family';
import { ConfigError, createRpcClient, startService, type ConfigOf, type ServiceDefinition } from '@coinvoice/runtime';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { SignerService } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { TREASURY_NETWORKS, type TreasuryNetwork } from '../treasury';
import { EvmNode } from './evm-node';
import { createProcessorMetrics } from './metrics';
import { EvmProcessor } from './processor';
import { EVM_ASSETS, processorSettings } from './settings';
import { takeInAccountedDeposits } from './sweep-intake';
import { tronProcessorService } from './tron/role';
import { utxoProcessorService } from './utxo/role';
import { payoutSchema } from '../schema';

/** The networks with a processor (docs/treasury.md#processor): one module per chain family. */
export const PROCESSED_NETWORKS = TREASURY_NETWORKS;
export type ProcessedNetwork = TreasuryNetwork;

function isProcessedNetwork(network: string): network is ProcessedNetwork {
  return (PROCESSED_NETWORKS as readonly string[]).includes(network);
}

/** The processor of any network, as its definition (settings, checks, build): deploy checks read it. */
export function processorDefinition(network: string) {
  if (!isProcessedNetwork(network)) {
    throw new ConfigError('process <network>', `a network with a processor: ${PROCESSED_NETWORKS.join(', ')}`, network);
  }
  switch (network) {
    case 'ethereum':
      return processorService(network);
    case 'bitcoin':
    case 'litecoin':
      return utxoProcessorService(network);
    case 'tron':
      return tronProcessorService();
  }
}

/** `main.js process <network>`: its config checked first (the node, one line naming it), then served. */
export function startProcessor(network: string) {
  if (!isProcessedNetwork(network)) {
    throw new ConfigError('process <network>', `a network with a processor: ${PROCESSED_NETWORKS.join(', ')}`, network);
  }
  switch (network) {
    case 'ethereum':
      return startService(processorService(network));
    case 'bitcoin':
    case 'litecoin':
      return startService(utxoProcessorService(network));
    case 'tron':
      return startService(tronProcessorService());
  }
}

/** Stops the start (one line naming the variable) when the network's node is not configured. */
export function requireProcessorNode(network: string, config: ConfigOf<typeof processorSettings>): void {
  if (config.CHAIN_ETHEREUM_RPC_URL === '') throw new ConfigError('CHAIN_ETHEREUM_RPC_URL', `the ${network} node's URL (process ${network} needs it)`, undefined);
}

/** The Ethereum processor process, as a runtime ServiceDefinition (health, admin, relay). */
export function processorService(network: string): ServiceDefinition<typeof processorSettings> {
  if (network !== 'ethereum') throw new ConfigError('process <network>', 'ethereum (this definition is the EVM processor\'s)', network);
  return {
    // The serve role's schema exactly: whichever role starts first leaves the same one.
    ...payoutSchema,
    rpcServices: [],
    // A processor serves grpc.health.v1 only: no RPC of its own for anyone to call.
    callers: [],
    settings: processorSettings,
    checkConfig(config) {
      // Before any connection: a processor without its node stops at once, with one line.
      requireProcessorNode(network, config);
      requireMainChainIds(config);
      if (config.APP_ENV === 'production' && !config.SIGNER_URL.startsWith('https:')) {
        throw new ConfigError('SIGNER_URL', 'an https:// URL in production (the signer answers over mutual TLS only)', config.SIGNER_URL);
      }
    },
    build({ config, sql, logger, metrics: registry, rpcTls }) {
      requireProcessorNode(network, config);
      // A signature is quick; the deadline bounds how long a payout row stays locked waiting for one.
      const signer = createRpcClient(SignerService, config.SIGNER_URL, { timeoutMs: 15_000, tls: rpcTls });
      // A page of deposits at a time: a slow answer only delays the sweeps.
      const invoices = createRpcClient(InvoiceService, config.INVOICE_URL, { timeoutMs: 30_000, tls: rpcTls });
      const assets = new Set<string>(EVM_ASSETS);
      const processor = new EvmProcessor({
        network,
        sql,
        node: new EvmNode({ url: config.CHAIN_ETHEREUM_RPC_URL, timeoutMs: config.CHAIN_ETHEREUM_RPC_TIMEOUT_MS }),
        signer,
        logger,
        metrics: createProcessorMetrics(registry),
        contracts: { USDT: config.CHAIN_ETHEREUM_USDT_CONTRACT, USDC: config.CHAIN_ETHEREUM_USDC_CONTRACT },
        confirmations: config.CHAIN_ETHEREUM_CONFIRMATIONS,
        pollMs: config.PAYOUT_PROCESSOR_POLL_MS,
        replaceAfterMs: config.PAYOUT_REPLACE_AFTER,
        autoMax: { ETH: config.PAYOUT_AUTO_MAX_ETH, USDT: config.PAYOUT_AUTO_MAX_USDT, USDC: config.PAYOUT_AUTO_MAX_USDC },
        dust: { ETH: config.SWEEP_DUST_ETH, USDT: config.SWEEP_DUST_USDT, USDC: config.SWEEP_DUST_USDC },
        caps: { maxGasLimit: config.SIGNER_MAX_GAS_LIMIT, maxFeePerGas: config.SIGNER_MAX_FEE_PER_GAS_WEI, maxPriorityFeePerGas: config.SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI },
        treasuryMinimum: { ETH: config.TREASURY_MIN_BALANCE_ETH, USDT: config.TREASURY_MIN_BALANCE_USDT, USDC: config.TREASURY_MIN_BALANCE_USDC },
        stuckAfterMs: config.PAYOUT_STUCK_AFTER,
        // The sweep intake (docs/treasury.md#sweep-tasks): accounted deposits become sweep tasks.
        takeInDeposits: () =>
          takeInAccountedDeposits({ sql, listDeposits: (request) => invoices.listAccountedDeposits(request), network, chain: network, assets, logger }),
      });
      return { routes() {}, workers: [processor] };
    },
  };
}
