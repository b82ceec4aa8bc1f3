/**
 * The `process tron` role of the payout service (docs/treasury.md#tron): the same image and schema
 * as `serve`, a process that runs one TronProcessor (plus the runtime's outbox relay for
 * payout.completed / payout.rejected, gRPC health and the admin port). It holds nothing secret:
 * the signer signs. Settings are documented in services/payout/README.md ("Processor"); the node
 * settings are the invoice watcher's (services/chains tron/family.ts), so one ConfigMap configures both.
 */
import { tronFamily } from '@coinvoice/chains/tron/family';
import { ConfigError, createRpcClient, setting, type ConfigOf, type ServiceDefinition } from '@coinvoice/runtime';
import { SignerService } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { payoutSettings } from '../../settings';
import { signerSettings } from '../../signer/settings';
import { createProcessorMetrics } from '../metrics';
import { processorSettings } from '../settings';
import { TronNode } from './node';
import { TronProcessor } from './processor';
import { payoutSchema } from '../../schema';

const watcherSettings = tronFamily.watcherSettings;

export const tronProcessorSettings = {
  /** The Tron full node's HTTP API (the watcher's setting): builds, broadcasts, outcomes, balances. */
  CHAIN_TRON_API_URL: watcherSettings.CHAIN_TRON_API_URL,
  CHAIN_SOURCE_TIMEOUT_MS: watcherSettings.CHAIN_SOURCE_TIMEOUT_MS,
  CHAIN_TRON_USDT_CONTRACT: watcherSettings.CHAIN_TRON_USDT_CONTRACT,
  /** Confirmations after which a payout completes: the invoices' count. */
  CHAIN_TRON_CONFIRMATIONS: watcherSettings.CHAIN_TRON_CONFIRMATIONS,
  SIGNER_URL: processorSettings.SIGNER_URL,
  /** Payouts up to this amount go without an operator's Approve (the serve role's declarations; USDT shared with Ethereum's). */
  PAYOUT_AUTO_MAX_TRX: payoutSettings.PAYOUT_AUTO_MAX_TRX,
  PAYOUT_AUTO_MAX_USDT: payoutSettings.PAYOUT_AUTO_MAX_USDT,
  /** A TRC-20 transfer's fee_limit: the signer's cap, the signer role's declaration (docs/treasury.md#tron). */
  SIGNER_MAX_FEE_LIMIT_SUN: signerSettings.SIGNER_MAX_FEE_LIMIT_SUN,
  /**
   * How long a payout transaction lives (its expiration, from when it is built). Longer rides out
   * a slow broadcast; shorter re-signs sooner a transaction that never reached a block. At most
   * the signer's SIGNER_TRON_MAX_EXPIRATION (default 10m).
   */
  PAYOUT_TRON_LIFETIME: setting.duration({ default: '5m', minMs: 10_000, maxMs: 24 * 3_600_000 }),
  PAYOUT_PROCESSOR_POLL_MS: processorSettings.PAYOUT_PROCESSOR_POLL_MS,
} as const;

type TronProcessorConfig = ConfigOf<typeof tronProcessorSettings>;

/** Stops the start (one line naming the variable) when the Tron node is not configured. */
function requireTronNode(config: TronProcessorConfig): void {
  if (config.CHAIN_TRON_API_URL === '') throw new ConfigError('CHAIN_TRON_API_URL', "the Tron full node's HTTP API URL (process tron needs it)", undefined);
}

export function tronProcessorService(): ServiceDefinition<typeof tronProcessorSettings> {
  return {
    // The serve role's schema exactly: whichever role starts first leaves the same one.
    ...payoutSchema,
    rpcServices: [],
    // A processor serves grpc.health.v1 only: no RPC of its own for anyone to call.
    callers: [],
    settings: tronProcessorSettings,
    checkConfig(config) {
      requireTronNode(config);
      if (config.APP_ENV === 'production' && !config.SIGNER_URL.startsWith('https:')) {
        throw new ConfigError('SIGNER_URL', 'an https:// URL in production (the signer answers over mutual TLS only)', config.SIGNER_URL);
      }
    },
    build({ config, sql, logger, metrics: registry, rpcTls }) {
      requireTronNode(config);
      const processor = new TronProcessor({
        sql,
        node: new TronNode({ url: config.CHAIN_TRON_API_URL, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS }),
        signer: createRpcClient(SignerService, config.SIGNER_URL, { timeoutMs: 15_000, tls: rpcTls }),
        logger,
        metrics: createProcessorMetrics(registry),
        confirmations: config.CHAIN_TRON_CONFIRMATIONS,
        pollMs: config.PAYOUT_PROCESSOR_POLL_MS,
        autoMax: { TRX: config.PAYOUT_AUTO_MAX_TRX, USDT: config.PAYOUT_AUTO_MAX_USDT },
        usdtContract: config.CHAIN_TRON_USDT_CONTRACT,
        feeLimitSun: config.SIGNER_MAX_FEE_LIMIT_SUN,
        lifetimeMs: config.PAYOUT_TRON_LIFETIME,
      });
      return { routes() {}, workers: [processor] };
    },
  };
}
