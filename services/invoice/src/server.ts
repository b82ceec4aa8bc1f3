import { migrationsDirOf, type ServiceDefinition } from '@coinvoice/runtime';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { InvoiceHandlers } from './handlers';
import { loadKeyRing } from './key-ring';
import { createInvoiceMetrics } from './metrics';
import { invoiceSettings, type XpubVariable } from './settings';
import { ExpirySweeper } from './sweeper';

export { invoiceSettings } from './settings';

/** The invoice service process: what it serves and the background work it runs. */
export const invoiceService: ServiceDefinition<typeof invoiceSettings> = {
  name: 'invoice',
  rpcServices: [InvoiceService.typeName],
  settings: invoiceSettings,
  migrationsDir: migrationsDirOf(__dirname),
  async build({ config, sql, logger, metrics: registry }) {
    const metrics = createInvoiceMetrics(registry);
    const keys = await loadKeyRing({
      sql,
      configured: config as Readonly<Record<XpubVariable, string>>,
      logger,
      production: config.APP_ENV === 'production',
    });
    const handlers = new InvoiceHandlers({ sql, rates: config.INVOICE_RATE_TABLE, keys, metrics });
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
      workers: [sweeper],
    };
  },
};
