/**
 * The `watch <chain>` role of the invoice service: the same image and settings as `serve`, a
 * process that runs one ChainWatcher (plus the runtime's outbox relay, gRPC health and admin
 * port for probes and /metrics) instead of the invoice API. `CHAIN_ADAPTERS` maps each chain
 * name to its adapter factory; adding a chain is one entry (see chain-adapter.ts).
 */
import { ConfigError, migrationsDirOf, type ServiceDefinition } from '@coinvoice/runtime';
import { invoiceIdempotencyKeys } from '../store/idempotency';
import { invoiceSettings } from '../settings';
import type { ConfigOf } from '@coinvoice/runtime';
import type { ChainAdapter, ChainName } from './chain-adapter';
import type * as EsploraModule from './esplora-adapter';
import type * as EthereumModule from './ethereum-adapter';
import { createWatcherMetrics } from './metrics';
import type * as TronModule from './tron-adapter';
import { ChainWatcher } from './watcher';
import { paymentCountsByStatus } from '../store/payments';

type InvoiceConfig = ConfigOf<typeof invoiceSettings>;

/*
 * The adapters and their chain libraries load only when a watcher builds one: the serve role
 * imports this table for confirmation counts, and viem alone adds ~30 MB to a process's memory.
 */
const ethereumModule = (): typeof EthereumModule => require('./ethereum-adapter');
const esploraModule = (): typeof EsploraModule => require('./esplora-adapter');
const tronModule = (): typeof TronModule => require('./tron-adapter');

export interface ChainSource {
  /** Null when the chain's source is not configured (no watcher for it). */
  adapter(config: InvoiceConfig): ChainAdapter | null;
  /** The variable that configures the source, for the "not configured" line. */
  sourceVariable: string;
  pollMs(config: InvoiceConfig): number;
  batchBlocks(config: InvoiceConfig): number;
  confirmations(config: InvoiceConfig): number;
}

export const CHAIN_ADAPTERS: Partial<Record<ChainName, ChainSource>> = {
  ethereum: {
    sourceVariable: 'CHAIN_ETHEREUM_RPC_URL',
    adapter: (config) =>
      config.CHAIN_ETHEREUM_RPC_URL === ''
        ? null
        : new (ethereumModule().EthereumAdapter)({
            rpcUrl: config.CHAIN_ETHEREUM_RPC_URL,
            timeoutMs: config.CHAIN_ETHEREUM_RPC_TIMEOUT_MS,
            tokens: { USDT: config.CHAIN_ETHEREUM_USDT_CONTRACT, USDC: config.CHAIN_ETHEREUM_USDC_CONTRACT },
          }),
    pollMs: (config) => config.CHAIN_ETHEREUM_POLL_MS,
    batchBlocks: (config) => config.CHAIN_ETHEREUM_BATCH_BLOCKS,
    confirmations: (config) => config.CHAIN_ETHEREUM_CONFIRMATIONS,
  },
  bitcoin: {
    sourceVariable: 'CHAIN_BITCOIN_ESPLORA_URL',
    adapter: (config) =>
      config.CHAIN_BITCOIN_ESPLORA_URL === ''
        ? null
        : new (esploraModule().EsploraAdapter)({ chain: 'bitcoin', baseUrl: config.CHAIN_BITCOIN_ESPLORA_URL, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS }),
    pollMs: (config) => config.CHAIN_BITCOIN_POLL_MS,
    batchBlocks: () => UTXO_BATCH_BLOCKS,
    confirmations: (config) => config.CHAIN_BITCOIN_CONFIRMATIONS,
  },
  litecoin: {
    sourceVariable: 'CHAIN_LITECOIN_ESPLORA_URL',
    adapter: (config) =>
      config.CHAIN_LITECOIN_ESPLORA_URL === ''
        ? null
        : new (esploraModule().EsploraAdapter)({ chain: 'litecoin', baseUrl: config.CHAIN_LITECOIN_ESPLORA_URL, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS }),
    pollMs: (config) => config.CHAIN_LITECOIN_POLL_MS,
    batchBlocks: () => UTXO_BATCH_BLOCKS,
    confirmations: (config) => config.CHAIN_LITECOIN_CONFIRMATIONS,
  },
  tron: {
    sourceVariable: 'CHAIN_TRON_API_URL',
    adapter: (config) =>
      config.CHAIN_TRON_API_URL === '' ? null : new (tronModule().TronAdapter)({ apiUrl: config.CHAIN_TRON_API_URL, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS }),
    pollMs: (config) => config.CHAIN_TRON_POLL_MS,
    batchBlocks: () => UTXO_BATCH_BLOCKS,
    confirmations: (config) => config.CHAIN_TRON_CONFIRMATIONS,
  },
};

/** Blocks per transaction while an Esplora or Tron watcher backfills (each block is one or more requests). */
const UTXO_BATCH_BLOCKS = 10;

/** Confirmations per chain without a configured source (docs/architecture.md#chains-and-sources defaults). */
const DEFAULT_CONFIRMATIONS: Readonly<Record<ChainName, number>> = { ethereum: 12, bitcoin: 2, litecoin: 6, tron: 20 };

/** The confirmations a new live invoice on `chain` will need. */
export function confirmationsRequired(chain: ChainName, config: InvoiceConfig): number {
  return CHAIN_ADAPTERS[chain]?.confirmations(config) ?? DEFAULT_CONFIRMATIONS[chain];
}

export function isChainName(value: unknown): value is ChainName {
  return typeof value === 'string' && value in DEFAULT_CONFIRMATIONS;
}

/** Stops the start (one line naming the variable) when the chain's source is not configured. */
export function requireChainSource(chain: string, config: InvoiceConfig): void {
  const source = isChainName(chain) ? CHAIN_ADAPTERS[chain] : undefined;
  if (source && source.adapter(config) === null) {
    throw new ConfigError(source.sourceVariable, `the ${chain} node's URL (watch ${chain} needs it)`, undefined);
  }
}

/** The watcher process for one chain, as a runtime ServiceDefinition (health, admin, relay). */
export function watcherService(chain: string): ServiceDefinition<typeof invoiceSettings> {
  const source = isChainName(chain) ? CHAIN_ADAPTERS[chain] : undefined;
  if (!isChainName(chain) || !source) {
    throw new ConfigError('watch <chain>', `a chain with a watcher: ${Object.keys(CHAIN_ADAPTERS).join(', ')}`, chain);
  }
  return {
    name: 'invoice',
    rpcServices: [],
    // A watcher serves grpc.health.v1 only: no RPC of its own for anyone to call.
    callers: [],
    settings: invoiceSettings,
    migrationsDir: migrationsDirOf(__dirname),
    // The serve role's migrations exactly: whichever role starts first leaves the same schema.
    builtInMigrations: [invoiceIdempotencyKeys.migration],
    build({ config, sql, logger, metrics: registry }) {
      const adapter = source.adapter(config);
      if (!adapter) throw new ConfigError(source.sourceVariable, `the ${chain} node's URL (watch ${chain} needs it)`, undefined);
      const confirmations = source.confirmations(config);
      const watcher = new ChainWatcher({
        sql,
        adapter,
        logger,
        metrics: createWatcherMetrics(registry, { chain, countPayments: () => paymentCountsByStatus(sql, chain) }),
        pollMs: source.pollMs(config),
        batchBlocks: source.batchBlocks(config),
        finalityDepth: Math.max(confirmations * 2, confirmations + 6),
        monitorAfterExpiryMs: config.INVOICE_MONITOR_AFTER_EXPIRY,
        standbyRetryMs: Math.min(2_000, source.pollMs(config) * 2),
        reconcileDepth: confirmations,
        reconcilePerBlock: config.WATCHER_RECONCILE_PER_BLOCK,
      });
      return { routes() {}, workers: [watcher] };
    },
  };
}
