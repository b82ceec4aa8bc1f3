import { connectNats, createLogger, createRpcClient, EventVerifier, loadConfig, rpcTlsOf, runMain } from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { PayoutService } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { ApiKeyVerifier } from './auth/api-keys';
import { RevocationListener } from './auth/revocations';
import { SessionVerifier } from './auth/sessions';
import { GatewayRateLimits } from './rate-limits';
import { Backends, GATEWAY_BATCHED_INVOICE_CALLS } from './backends';
import { gatewaySettings, refuseUnsafeGatewayConfig } from './config';
import { build } from './server';

runMain({
  name: 'gateway',
  async start() {
    const config = loadConfig(gatewaySettings);
    refuseUnsafeGatewayConfig(config);
    // Before any connection: a gateway that cannot verify auth's events must not start.
    const eventVerifier = new EventVerifier(config.EVENT_VERIFY_KEYS);
    eventVerifier.requireProducers(['auth'], 'gateway revocations');
    const logger = createLogger({ service: 'gateway', level: config.LOG_LEVEL });
    const tls = rpcTlsOf(config);
    const backends = new Backends(
      { auth: config.AUTH_URL, invoice: config.INVOICE_URL, payout: config.PAYOUT_URL, notifier: config.NOTIFIER_URL },
      { tls, logger },
    );
    const auth = createRpcClient(AuthService, config.AUTH_URL, { tls });
    // The calls made per API request travel in batches (docs/performance.md#batched-calls).
    const invoices = createRpcClient(InvoiceService, config.INVOICE_URL, { tls, batched: GATEWAY_BATCHED_INVOICE_CALLS });
    const notifier = createRpcClient(NotifierService, config.NOTIFIER_URL, { tls });
    const payouts = createRpcClient(PayoutService, config.PAYOUT_URL, { tls });
    const apiKeys = new ApiKeyVerifier(auth, { ttlMs: config.API_KEY_CACHE_TTL_MS });
    const sessions = new SessionVerifier(auth);
    const nats = await connectNats({ url: config.NATS_URL, name: 'gateway', logger });
    const revocations = new RevocationListener(nats, config.EVENT_NAMESPACE, apiKeys, logger, eventVerifier, sessions);
    revocations.start();
    await revocations.ready();
    // Subscribed first, then the list: no revocation falls between the two.
    await sessions.ensureRevocations().catch((err: unknown) => logger.warn({ err }, 'session revocations not loaded yet; loaded at the first session request'));

    const rateLimits = new GatewayRateLimits({ apiPerKey: config.RATE_LIMIT_API_PER_KEY, checkoutPerIp: config.RATE_LIMIT_CHECKOUT_PER_IP });
    const { app } = build({
      backends,
      clients: { auth, invoices, notifier, payouts },
      apiKeys,
      sessions,
      logger,
      http: { bodyLimitBytes: config.HTTP_BODY_LIMIT, requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT, keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT },
      rateLimits,
      eventStreamsPerKey: config.EVENT_STREAMS_PER_KEY,
      trustProxy: config.GATEWAY_TRUST_PROXY,
    });
    const address = await app.listen({ port: config.GATEWAY_PORT, host: config.BIND_HOST });
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
