import { allowCallers, createRpcClient, PostgresRateLimitStore, rateLimitCleaner, signerOf, streamSettingsOf, type ServiceDefinition } from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { Counter } from 'prom-client';
import { createSsrfGuard, ssrfModeOf } from '@coinvoice/domain/ssrf';
import { nodeHttpSender } from './delivery/http-sender';
import { WebhookConnections } from './delivery/connections';
import { DeliveryWorker } from './delivery/worker';
import { createMailer } from './email';
import { notifierConsumers } from './events/consumers';
import { NotifierHandlers } from './handlers';
import { ListenCursors } from './listen-cursors';
import { AuthProjectDirectory } from './project-context';
import { ProjectUpdatesListener } from './events/project-updates';
import { projectEventsRetention } from './project-events-retention';
import { webhookLogRetention } from './webhook-log-retention';
import { notifierSettings } from './settings';
import { notifierSchema } from './schema';

export { notifierSettings } from './settings';

/** The notifier service process: what it serves and the background work it runs. */
export const notifierService: ServiceDefinition<typeof notifierSettings> = {
  ...notifierSchema,
  rpcServices: [NotifierService.typeName],
  callers: [
    allowCallers(NotifierService, {
      listWebhookDeliveries: ['gateway'],
      getWebhookDelivery: ['gateway'],
      redeliverWebhook: ['gateway'],
      sendTestWebhook: ['gateway'],
      listProjectEvents: ['gateway'],
      // The code emails: only the service that owns the code.
      sendPayoutVerificationEmail: ['payout'],
      sendAutoSweepVerificationEmail: ['payout'],
      sendEmailVerificationEmail: ['auth'],
      sendSignUpAttemptEmail: ['auth'],
    }),
  ],
  settings: notifierSettings,
  // Webhooks are sent for invoice and payout events those services signed; auth's signed
  // project updates invalidate the cached project contexts.
  consumesEventsOf: ['invoice', 'payout', 'auth'],
  build({ config, sql, logger, metrics, rpcTls, eventVerifier }) {
    // A short deadline: the answer is needed inside a consumer transaction and a delivery lease.
    const projects = new AuthProjectDirectory(createRpcClient(AuthService, config.AUTH_URL, { timeoutMs: 2_000, tls: rpcTls }), {
      ttlMs: config.PROJECT_CONTEXT_TTL_MS,
      // Kept only once auth's project updates are received (the listener starts the cache).
      caching: false,
    });
    const ssrfMode = ssrfModeOf(config);
    const mailer = createMailer(config);
    const attempts = new Counter({
      name: 'notifier_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome',
      labelNames: ['outcome'] as const,
      registers: [metrics],
    });
    const claims = new Counter({
      name: 'notifier_webhook_claims_total',
      help: 'Claim queries the delivery worker made, over every project (scope="all") or only those whose slot had just freed (docs/webhook-delivery.md#claims)',
      labelNames: ['scope'] as const,
      registers: [metrics],
    });
    // Kept-alive connections per vetted destination (docs/webhook-delivery.md#connections).
    const connections = new WebhookConnections({ maxSocketsPerDestination: config.WEBHOOK_MAX_PER_HOST });
    const worker = new DeliveryWorker({
      sql,
      logger,
      projects,
      guard: createSsrfGuard({ mode: ssrfMode }),
      sender: nodeHttpSender(connections),
      schedule: config.WEBHOOK_RETRY_SCHEDULE,
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      maxConcurrency: config.WEBHOOK_MAX_CONCURRENCY,
      maxPerProject: config.WEBHOOK_MAX_PER_PROJECT,
      maxPerHost: config.WEBHOOK_MAX_PER_HOST,
      pollIntervalMs: config.WEBHOOK_POLL_INTERVAL_MS,
      onAttempt: ({ outcome }) => attempts.inc({ outcome }),
      onClaim: ({ scope }) => claims.inc({ scope }),
    });
    const handlers = new NotifierHandlers({
      sql,
      projects,
      logger,
      mailer,
      logRetentionDays: config.WEBHOOK_LOG_RETENTION_DAYS,
      onDeliveryCreated: () => worker.wake(),
      testEvents: {
        store: new PostgresRateLimitStore(sql),
        perProject: config.RATE_LIMIT_WEBHOOK_TEST_PER_PROJECT,
        redeliveriesPerProject: config.RATE_LIMIT_WEBHOOK_REDELIVER_PER_PROJECT,
      },
      // Every replica holds the notifier's event key: a cursor one sealed, another opens.
      listenCursors: new ListenCursors(signerOf(config).deriveKey('coinvoice listen cursor v1')),
    });
    logger.info(
      {
        webhookDestinations: ssrfMode === 'production' ? 'public addresses only' : 'private and loopback allowed (development)',
        email: mailer.description,
        retrySchedule: config.WEBHOOK_RETRY_SCHEDULE.baseDelaysMs,
      },
      'notifier configured',
    );
    return {
      routes(router) {
        router.service(NotifierService, handlers);
      },
      // The consumers and the listener, once NATS answers; the service stops them before these
      // workers (a message in hand may hand the worker one more delivery).
      eventWorkers(nats) {
        const projectUpdates = new ProjectUpdatesListener({ nats, namespace: config.EVENT_NAMESPACE, verifier: eventVerifier, logger, directory: projects });
        const consumers = notifierConsumers({
          sql,
          nats,
          namespace: config.EVENT_NAMESPACE,
          stream: streamSettingsOf(config),
          verifier: eventVerifier,
          logger,
          projects,
          mailer,
          onDeliveryCreated: (projectId) => worker.wakeFor(projectId),
          dispatch: worker,
        });
        return [
          {
            start: () => projectUpdates.start(),
            stop: async () => projectUpdates.stop(),
          },
          ...consumers,
        ];
      },
      workers: [
        {
          start: () => worker.start(),
          // The attempts in flight, then the mail transport.
          async stop() {
            await worker.stop();
            connections.close();
            mailer.close();
          },
        },
        projectEventsRetention({ sql, logger }),
        webhookLogRetention({ sql, logger, retentionDays: config.WEBHOOK_LOG_RETENTION_DAYS }),
        rateLimitCleaner(sql, logger),
      ],
    };
  },
};
