import type { ServiceName } from '@coinvoice/runtime';
import { idempotencyKeysMigration, migrationsDirOf, RATE_LIMITS_MIGRATION, type ServiceSchema } from '@coinvoice/runtime/migrate-service';

/**
 * The payout service's schema: all that `main.js migrate` loads (docs/performance.md#starting);
 * the service's definitions (server.ts, the processor roles) are built on it.
 */
export const payoutSchema: ServiceSchema & { name: ServiceName } = {
  name: 'payout',
  migrationsDir: migrationsDirOf(__dirname),
  // Counters shared by every replica (rate limits that guard secrets) and idempotency_keys, whose
  // one DDL each is the runtime's; the keys name rows of payouts (store/idempotency.ts).
  builtInMigrations: [RATE_LIMITS_MIGRATION, idempotencyKeysMigration('payout', 'payouts')],
};
