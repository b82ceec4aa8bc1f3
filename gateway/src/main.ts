import { connectNats, createLogger, createRpcClient, loadConfig, runMain } from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { PayoutService } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { ApiKeyVerifier } from './auth/api-keys';
import { RevocationListener } from './auth/revocations';
import { SessionVerifier } from './auth/sessions';
import { Backends } from './backends';
import { gatewaySettings } from './config';
import { build } from './server';

runMain({
  name: 'gateway',
  async start() {
    const config = loadConfig(gatewaySettings);
    const logger = createLogger({ service: 'gateway', level: config.LOG_LEVEL });
    const backends = new Backends({
      auth: config.AUTH_URL,
      invoice: config.INVOICE_URL,
      payout: config.PAYOUT_URL,
      notifier: config.NOTIFIER_URL,
    });
    const auth = createRpcClient(AuthService, config.AUTH_URL);
    const invoices = createRpcClient(InvoiceService, config.INVOICE_URL);
    const notifier = createRpcClient(NotifierService, config.NOTIFIER_URL);
    const payouts = createRpcClient(PayoutService, config.PAYOUT_URL);
    const apiKeys = new ApiKeyVerifier(auth, { ttlMs: config.API_KEY_CACHE_TTL_MS });
    const sessions = new SessionVerifier(auth);
    const nats = await connectNats({ url: config.NATS_URL, name: 'gateway', logger });
    const revocations = new RevocationListener(nats, config.EVENT_NAMESPACE, apiKeys, logger);
    revocations.start();
    await revocations.ready();

    const { app } = build({ backends, clients: { auth, invoices, notifier, payouts }, apiKeys, sessions, logger, bodyLimitBytes: config.BODY_LIMIT_BYTES });
    const address = await app.listen({ port: config.GATEWAY_PORT, host: config.GATEWAY_HOST });
    logger.info({ address }, 'gateway listening');
    return {
      logger,
      running: {
        async stop() {
          await app.close();
          revocations.stop();
          await nats.drain().catch(() => undefined);
        },
      },
    };
  },
});
