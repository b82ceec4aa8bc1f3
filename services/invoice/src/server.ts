import { allowCallers, type ServiceDefinition } from '@coinvoice/runtime';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { InvoiceHandlers } from './handlers';
import { InvoiceWrites } from './invoice-writes';
import { loadKeyRing } from './key-ring';
import { createInvoiceMetrics } from './metrics';
import { CoinbaseFeed, KrakenFeed } from './rates/feeds';
import { LiveRateBook } from './rates/live-rate-book';
import { InvoicePricing } from './rates/pricing';
import { checkInvoiceConfig, invoiceSettings, ratesSourceOf, requiredInProduction, type InvoiceConfig, type XpubVariable } from './settings';
import { ExpirySweeper } from './sweeper';
import { chainSources, confirmationsRequired } from '@coinvoice/chains/watchers';
import { networkLabel } from '@coinvoice/chains/currencies';
import { CRYPTO_CODES } from '@coinvoice/chains/coin';
import { evmNodeConfig } from '@coinvoice/chains/evm/family';
import { isEvmChain, type EvmTokenCode } from '@coinvoice/chains/evm/networks';
import { PayMethodCatalog, type PayMethodPolicy } from './domain/pay-methods';
import { invoiceSchema } from './schema';
import { houseSendersOf } from './treasuries';

export { invoiceSettings } from './settings';

/** The (asset, network) pairs this configuration takes (domain/pay-methods.ts). */
export function payMethodPolicy(config: InvoiceConfig): PayMethodPolicy {
  const sources = chainSources(config);
  return {
    enabledCoins: config.INVOICE_COINS,
    enabledNetworks: config.INVOICE_NETWORKS,
    configuredContract: (method) => {
      if (isEvmChain(method.chain)) return evmNodeConfig(config, method.chain).tokens[method.code as EvmTokenCode] ?? '';
      if (method.chain === 'tron') return method.code === 'USDT' ? config.CHAIN_TRON_USDT_CONTRACT : method.code === 'USDC' ? config.CHAIN_TRON_USDC_CONTRACT : '';
      return '';
    },
    confirmationsFor: (chain) => confirmationsRequired(chain, config),
    watched: (chain) => {
      const source = sources[chain];
      return source !== undefined && (config as unknown as Readonly<Record<string, unknown>>)[source.sourceVariable] !== '';
    },
    label: networkLabel,
    chainId: (chain) => (isEvmChain(chain) ? evmNodeConfig(config, chain).chainId : undefined),
  };
}

/** The invoice service process: what it serves and the background work it runs. */
export const invoiceService: ServiceDefinition<typeof invoiceSettings> = {
  ...invoiceSchema,
  rpcServices: [InvoiceService.typeName],
  // The gateway; and the payout service for its ledger check.
  callers: [
    allowCallers(InvoiceService, {
      createInvoice: ['gateway'],
      getInvoice: ['gateway'],
      payInvoice: ['gateway'],
      listInvoices: ['gateway'],
      getCheckout: ['gateway'],
      getInvoiceProject: ['gateway'],
      getRates: ['gateway'],
      listCurrencies: ['gateway'],
      listLedgerCredits: ['payout'],
      // The payout processor's sweep intake (docs/treasury.md#sweep-tasks).
      listAccountedDeposits: ['payout', 'payout-processor'],
      // The payout API's destination check (docs/treasury.md#house-addresses).
      findHouseAddress: ['payout'],
    }),
  ],
  settings: invoiceSettings,
  checkConfig: checkInvoiceConfig,
  requiredInProduction,
  async build({ config, sql, logger, metrics: registry }) {
    const metrics = createInvoiceMetrics(registry);
    const payMethods = new PayMethodCatalog(payMethodPolicy(config));
    const keys = await loadKeyRing({
      sql,
      configured: config as Readonly<Record<XpubVariable, string>>,
      logger,
      production: config.APP_ENV === 'production',
      // Every enabled entry's key currency too: USDT on tron takes its addresses from the TRX key.
      enabledCoins: CRYPTO_CODES.filter((code) => config.INVOICE_COINS.includes(code) || payMethods.keyCurrencies().includes(code)),
    });
    const source = ratesSourceOf(config);
    const feedOptions = { timeoutMs: config.RATES_TIMEOUT_MS };
    const liveRates =
      source === 'live'
        ? new LiveRateBook({
            feeds: [
              new CoinbaseFeed({ ...feedOptions, baseUrl: config.RATES_COINBASE_URL }),
              new KrakenFeed({ ...feedOptions, baseUrl: config.RATES_KRAKEN_URL }),
            ],
            refreshMs: config.RATES_REFRESH_MS,
            maxAgeMs: config.RATES_MAX_AGE_MS,
            logger,
          })
        : undefined;
    if (liveRates) {
      // Quotes before serving (each provider asked once, bounded by RATES_TIMEOUT_MS): a replica
      // that just started prices live invoices at once. Providers down: it serves anyway (503
      // rates_unavailable for live invoices, the sandbox from the table) and keeps asking.
      liveRates.start();
      await liveRates.firstQuotes();
      const quoted = liveRates.providers().filter((p) => p.fetchedAt !== undefined).map((p) => p.source);
      logger.info({ quoted }, quoted.length > 0 ? 'live rates: first quotes in' : 'live rates: no provider answered yet; live invoices answer 503 until one does');
    }
    const pricing = new InvoicePricing({ source, table: config.INVOICE_RATE_TABLE, live: liveRates });
    const writes = new InvoiceWrites({
      sql,
      maxItems: config.INVOICE_BATCH_MAX,
      maxWaitMs: config.INVOICE_BATCH_WAIT_MS,
      onBatch: (kind, size, retriedAlone) => {
        metrics.batchSize.observe({ kind }, size);
        if (retriedAlone) metrics.batchesRetriedAlone.inc({ kind });
      },
    });
    const handlers = new InvoiceHandlers({
      sql,
      writes,
      pricing,
      ratesMaxAgeMs: config.RATES_MAX_AGE_MS,
      enabledCoins: config.INVOICE_COINS,
      keys,
      metrics,
      confirmationsFor: (chain) => confirmationsRequired(chain, config),
      payMethods,
      evmTreasuries: houseSendersOf('ethereum', config),
    });
    const sweeper = new ExpirySweeper({
      sql,
      logger,
      intervalMs: config.INVOICE_SWEEP_INTERVAL_MS,
      batchSize: config.INVOICE_SWEEP_BATCH_SIZE,
      metrics,
    });
    return {
      routes(router) {
        router.service(InvoiceService, handlers);
      },
      workers: liveRates ? [liveRates, sweeper] : [sweeper],
    };
  },
};
