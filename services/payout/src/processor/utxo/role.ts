/**
 * The `process bitcoin|litecoin` role of the payout service (docs/treasury.md#utxo): the same image
 * and schema as `serve`, a process that runs one UtxoProcessor (plus the runtime's outbox relay
 * for payout.completed / payout.rejected, gRPC health and the admin port for probes and /metrics).
 * It holds nothing secret: the signer signs. Settings are documented in services/payout/README.md
 * ("Processor"); the Esplora node settings are the invoice watchers' (services/chains utxo/family.ts),
 * so one ConfigMap configures both.
 */
import { utxoFamily } from '@coinvoice/chains/utxo/family';
import { BTC, LTC } from '@coinvoice/chains/utxo/coins';
import { ConfigError, createRpcClient, setting, type ConfigOf, type ServiceDefinition } from '@coinvoice/runtime';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { SignerService } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { maxFeeRateSettings } from '../../domain/fee-rate';
import { payoutSettings } from '../../settings';
import { createProcessorMetrics } from '../metrics';
import { processorSettings } from '../settings';
import { takeInAccountedDeposits } from '../sweep-intake';
import { EsploraClient } from './esplora';
import { UtxoProcessor, type UtxoNetwork } from './processor';
import { payoutSchema } from '../../schema';

const watcherSettings = utxoFamily.watcherSettings;

export const utxoProcessorSettings = {
  /** The Esplora nodes (the watchers' settings): fee estimates, transaction status, broadcasts. */
  CHAIN_BITCOIN_ESPLORA_URL: watcherSettings.CHAIN_BITCOIN_ESPLORA_URL,
  CHAIN_LITECOIN_ESPLORA_URL: watcherSettings.CHAIN_LITECOIN_ESPLORA_URL,
  CHAIN_SOURCE_TIMEOUT_MS: watcherSettings.CHAIN_SOURCE_TIMEOUT_MS,
  /** Confirmations after which a batch's payouts complete: the invoices' count. */
  CHAIN_BITCOIN_CONFIRMATIONS: watcherSettings.CHAIN_BITCOIN_CONFIRMATIONS,
  CHAIN_LITECOIN_CONFIRMATIONS: watcherSettings.CHAIN_LITECOIN_CONFIRMATIONS,
  /** The invoice service: its accounted deposits become the treasury's coins (ListAccountedDeposits). */
  INVOICE_URL: processorSettings.INVOICE_URL,
  SIGNER_URL: processorSettings.SIGNER_URL,
  /** Payouts up to this amount go without an operator's Approve (the serve role's declarations). */
  PAYOUT_AUTO_MAX_BTC: payoutSettings.PAYOUT_AUTO_MAX_BTC,
  PAYOUT_AUTO_MAX_LTC: payoutSettings.PAYOUT_AUTO_MAX_LTC,
  /** The highest fee rate a payout transaction pays (sat/vB); the signer refuses above it too. */
  ...maxFeeRateSettings,
  /** At most this many payouts in one transaction. */
  PAYOUT_BATCH_MAX: setting.int({ default: 50, min: 1, max: 500 }),
  /** A batch smaller than PAYOUT_BATCH_MAX goes once its oldest payout has been claimable this long. */
  PAYOUT_BATCH_WAIT: setting.duration({ default: '1m', minMs: 0, maxMs: 24 * 3_600_000 }),
  /** The fee rate is Esplora's estimate for confirmation within this many blocks. */
  PAYOUT_CONFIRM_TARGET: setting.int({ default: 6, min: 1, max: 1_008 }),
  /** A version not mined this long after its broadcast is replaced (BIP125, same inputs). */
  PAYOUT_REPLACE_AFTER: processorSettings.PAYOUT_REPLACE_AFTER,
  PAYOUT_PROCESSOR_POLL_MS: processorSettings.PAYOUT_PROCESSOR_POLL_MS,
  PAYOUT_STUCK_AFTER: processorSettings.PAYOUT_STUCK_AFTER,
} as const;

type UtxoProcessorConfig = ConfigOf<typeof utxoProcessorSettings>;

/** The network's own settings, by name. */
function networkSettings(network: UtxoNetwork, config: UtxoProcessorConfig) {
  return network === 'bitcoin'
    ? { urlVariable: 'CHAIN_BITCOIN_ESPLORA_URL', url: config.CHAIN_BITCOIN_ESPLORA_URL, confirmations: config.CHAIN_BITCOIN_CONFIRMATIONS, coin: BTC, autoMax: config.PAYOUT_AUTO_MAX_BTC, maxFeeRate: config.PAYOUT_MAX_FEE_RATE_BTC }
    : { urlVariable: 'CHAIN_LITECOIN_ESPLORA_URL', url: config.CHAIN_LITECOIN_ESPLORA_URL, confirmations: config.CHAIN_LITECOIN_CONFIRMATIONS, coin: LTC, autoMax: config.PAYOUT_AUTO_MAX_LTC, maxFeeRate: config.PAYOUT_MAX_FEE_RATE_LTC };
}

/** Stops the start (one line naming the variable) when the network's Esplora node is not configured. */
function requireEsplora(network: UtxoNetwork, config: UtxoProcessorConfig): void {
  const own = networkSettings(network, config);
  if (own.url === '') throw new ConfigError(own.urlVariable, `the ${network} Esplora node's URL (process ${network} needs it)`, undefined);
}

export function utxoProcessorService(network: UtxoNetwork): ServiceDefinition<typeof utxoProcessorSettings> {
  return {
    // The serve role's schema exactly: whichever role starts first leaves the same one.
    ...payoutSchema,
    rpcServices: [],
    // A processor serves grpc.health.v1 only: no RPC of its own for anyone to call.
    callers: [],
    settings: utxoProcessorSettings,
    checkConfig(config) {
      requireEsplora(network, config);
      if (config.APP_ENV === 'production' && !config.SIGNER_URL.startsWith('https:')) {
        throw new ConfigError('SIGNER_URL', 'an https:// URL in production (the signer answers over mutual TLS only)', config.SIGNER_URL);
      }
    },
    build({ config, sql, logger, metrics: registry, rpcTls }) {
      requireEsplora(network, config);
      const own = networkSettings(network, config);
      const signer = createRpcClient(SignerService, config.SIGNER_URL, { timeoutMs: 15_000, tls: rpcTls });
      const invoices = createRpcClient(InvoiceService, config.INVOICE_URL, { timeoutMs: 30_000, tls: rpcTls });
      const processor = new UtxoProcessor({
        network,
        asset: own.coin.code,
        sql,
        esplora: new EsploraClient({ baseUrl: own.url, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS }),
        signer,
        logger,
        metrics: createProcessorMetrics(registry),
        confirmations: own.confirmations,
        pollMs: config.PAYOUT_PROCESSOR_POLL_MS,
        replaceAfterMs: config.PAYOUT_REPLACE_AFTER,
        autoMax: own.autoMax,
        maxFeeRate: own.maxFeeRate,
        confirmTarget: config.PAYOUT_CONFIRM_TARGET,
        batchMax: config.PAYOUT_BATCH_MAX,
        batchWaitMs: config.PAYOUT_BATCH_WAIT,
        dust: BigInt(own.coin.dustLimitBaseUnits ?? 0),
        stuckAfterMs: config.PAYOUT_STUCK_AFTER,
        // The deposit intake (docs/treasury.md#utxo): accounted deposits become spendable coins, not sweep tasks.
        takeInDeposits: (record) =>
          takeInAccountedDeposits({
            sql,
            listDeposits: (request) => invoices.listAccountedDeposits(request),
            network,
            chain: network,
            assets: new Set([own.coin.code]),
            logger,
            record: (deposit) => record({ paymentId: deposit.paymentId, depositAddress: deposit.depositAddress, addressIndex: deposit.addressIndex, amount: deposit.amount }),
          }),
      });
      return { routes() {}, workers: [processor] };
    },
  };
}
