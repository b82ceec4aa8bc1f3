/**
 * The `watch <chain>` role of the invoice service: the same image and settings as `serve`, a
 * process that runs one ChainWatcher (plus the runtime's outbox relay, gRPC health and admin
 * port for probes and /metrics) instead of the invoice API. Which adapter reads the chain, how
 * often, and how many confirmations it needs is the chain family's (services/chains, `sources`).
 */
import { ConfigError, type ServiceDefinition } from '@coinvoice/runtime';
import { chainSources, isChainName, WATCHED_CHAINS } from '@coinvoice/chains/watchers';
import { invoiceSettings } from '../settings';
import { requireMainChainIds } from '@coinvoice/chains/evm/family';
import { houseSendersOf } from '../treasuries';
import { createWatcherMetrics } from './metrics';
import { ChainWatcher } from './watcher';
import { paymentCountsByStatus } from '../store/payments';
import type { ConfigOf } from '@coinvoice/runtime';
import { invoiceSchema } from '../schema';

type InvoiceConfig = ConfigOf<typeof invoiceSettings>;

/** Stops the start (one line naming the variable) when the chain's source is not configured. */
export function requireChainSource(chain: string, config: InvoiceConfig): void {
  const source = isChainName(chain) ? chainSources(config)[chain] : undefined;
  if (source && source.adapter() === null) {
    throw new ConfigError(source.sourceVariable, `the ${chain} node's URL (watch ${chain} needs it)`, undefined);
  }
}

/**
 * Asks the configured node whether it is the network it is configured as (EVM: `eth_chainId` and
 * each token's `decimals()`, docs/networks.md#configuration) before anything is watched; rejects
 * with a ChainSourceRefusal (one line naming both values) when it is not. What passes but deserves
 * an operator's eye (a token without a contract on a development chain) goes to `warn`.
 */
export async function verifyChainSource(chain: string, config: InvoiceConfig, warn?: (line: string) => void): Promise<void> {
  const source = isChainName(chain) ? chainSources(config)[chain] : undefined;
  await source?.verify?.(warn);
}

/** The watcher process for one chain, as a runtime ServiceDefinition (health, admin, relay). */
export function watcherService(chain: string): ServiceDefinition<typeof invoiceSettings> {
  if (!isChainName(chain)) {
    throw new ConfigError('watch <chain>', `a chain with a watcher: ${WATCHED_CHAINS.join(', ')}`, chain);
  }
  return {
    // The serve role's schema exactly: whichever role starts first leaves the same one.
    ...invoiceSchema,
    rpcServices: [],
    // A watcher serves grpc.health.v1 only: no RPC of its own for anyone to call.
    callers: [],
    settings: invoiceSettings,
    // A live invoice's chain is the main chain: a production watcher of a test chain never starts.
    // Production takes only each EVM network's main chain id (docs/networks.md#configuration).
    checkConfig: requireMainChainIds,
    build({ config, sql, logger, metrics: registry }) {
      const source = chainSources(config)[chain];
      const adapter = source?.adapter();
      if (!source || !adapter) throw new ConfigError(source?.sourceVariable ?? 'watch <chain>', `the ${chain} node's URL (watch ${chain} needs it)`, undefined);
      const confirmations = source.confirmations;
      const watcher = new ChainWatcher({
        sql,
        adapter,
        watchedNetworks: source.watchedNetworks ?? [chain],
        confirmations,
        logger,
        metrics: createWatcherMetrics(registry, { chain, countPayments: () => paymentCountsByStatus(sql, chain) }),
        pollMs: source.pollMs,
        batchBlocks: source.batchBlocks,
        finalityDepth: Math.max(confirmations * 2, confirmations + 6),
        monitorAfterExpiryMs: config.INVOICE_MONITOR_AFTER_EXPIRY,
        standbyRetryMs: Math.min(2_000, source.pollMs * 2),
        reconcileDepth: confirmations,
        reconcilePerBlock: config.WATCHER_RECONCILE_PER_BLOCK,
        watchedFullReloadMs: config.WATCHER_FULL_RELOAD,
        houseSenders: houseSendersOf(chain, config),
      });
      return { routes() {}, workers: [watcher] };
    },
  };
}
