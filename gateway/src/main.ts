import { connectNats, createLogger, createRpcClient, EVENTS_CONNECT_TIMEOUT_MS, EventsSide, EventVerifier, exitRefusedByNats, loadConfig, rpcTlsOf, runMain } from '@coinvoice/runtime';
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
    // The revocation feed, once NATS answers (docs/architecture.md#starting-while-nats-is-down):
    // until then session revocations are read from auth, at most once a second.
    let startedWithoutFeed = false;
    const feed = new EventsSide({
      logger,
      connect: () => connectNats({ url: config.NATS_URL, name: 'gateway', logger, connectTimeoutMs: EVENTS_CONNECT_TIMEOUT_MS }),
      onRefused: () => exitRefusedByNats(logger),
      onUnreachableAtStart: () => {
        startedWithoutFeed = true;
        sessions.setFeedLive(false);
        apiKeys.setFeedLive(false);
      },
      async setUp(nats) {
        const revocations = new RevocationListener(nats, config.EVENT_NAMESPACE, apiKeys, logger, eventVerifier, sessions);
        revocations.start();
        await revocations.ready();
        if (startedWithoutFeed) {
          // What was revoked before the subscription: no verification kept from then, and the list read again.
          apiKeys.clear();
          apiKeys.setFeedLive(true);
          sessions
            .loadRevocations()
            .then(() => sessions.setFeedLive(true))
            .catch((err: unknown) => logger.error({ err }, 'could not load session revocations from auth; still reading them from auth per request'));
        } else {
          // Subscribed first, then the list: no revocation falls between the two.
          await sessions.ensureRevocations().catch((err: unknown) => logger.warn({ err }, 'session revocations not loaded yet; loaded at the first session request'));
        }
        return [{ start: () => undefined, stop: async () => revocations.stop() }];
      },
    });
    await feed.start();

    const rateLimits = new GatewayRateLimits({
      apiPerKey: config.RATE_LIMIT_API_PER_KEY,
      checkoutPerIp: config.RATE_LIMIT_CHECKOUT_PER_IP,
      apiKeyLookupsPerIp: config.RATE_LIMIT_API_KEY_LOOKUPS_PER_IP,
    });
    const { app } = build({
      backends,
      clients: { auth, invoices, notifier, payouts },
      apiKeys,
      sessions,
      logger,
      http: { bodyLimitBytes: config.HTTP_BODY_LIMIT, requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT, keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT },
      rateLimits,
      eventStreamsPerKey: config.EVENT_STREAMS_PER_KEY,
      eventStreamsPerMerchant: config.EVENT_STREAMS_PER_MERCHANT,
      trustProxy: config.GATEWAY_TRUST_PROXY,
    });
    const address = await app.listen({ port: config.GATEWAY_PORT, host: config.BIND_HOST });
    logger.info({ address }, 'gateway listening');
    return {
      logger,
      running: {
        async stop() {
          await app.close();
          await feed.stop();
        },
      },
    };
  },
});
