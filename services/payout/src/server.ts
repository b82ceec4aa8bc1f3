import { createRpcClient, migrationsDirOf, type ServiceDefinition } from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { PayoutService } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { ledgerConsumer } from './events/ledger-consumer';
import { PayoutHandlers } from './handlers';
import { createPayoutMetrics } from './metrics';
import { payoutSettings } from './settings';
import { CodeExpirySweeper } from './sweeper';

export { payoutSettings } from './settings';

/** The payout service process: what it serves and the background work it runs. */
export const payoutService: ServiceDefinition<typeof payoutSettings> = {
  name: 'payout',
  rpcServices: [PayoutService.typeName],
  settings: payoutSettings,
  migrationsDir: migrationsDirOf(__dirname),
  build({ config, sql, nats, logger, metrics: registry }) {
    const metrics = createPayoutMetrics(registry);
    // A short deadline: RequestPayout waits for it before answering.
    const auth = createRpcClient(AuthService, config.AUTH_URL, { timeoutMs: 3_000 });
    const handlers = new PayoutHandlers({ sql, auth, logger, codeTtlMs: config.PAYOUT_CODE_TTL_MS, metrics });
    const ledger = ledgerConsumer({
      sql,
      nats,
      namespace: config.EVENT_NAMESPACE,
      logger,
      onCredited: (credit) => metrics.credited.inc({ currency: credit.currency, environment: credit.environment }),
    });
    const sweeper = new CodeExpirySweeper({
      sql,
      logger,
      intervalMs: config.PAYOUT_SWEEP_INTERVAL_MS,
      batchSize: config.PAYOUT_SWEEP_BATCH_SIZE,
      metrics,
    });
    return {
      routes(router) {
        router.service(PayoutService, handlers);
      },
      workers: [ledger, sweeper],
    };
  },
};
