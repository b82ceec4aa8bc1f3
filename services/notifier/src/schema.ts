import type { ServiceName } from '@coinvoice/runtime';
import { migrationsDirOf, RATE_LIMIT_COUNTERS_DDL, sqlMigration, type ServiceSchema } from '@coinvoice/runtime/migrate-service';

/**
 * The notifier service's schema: all that `main.js migrate` loads (docs/performance.md#starting);
 * the service's definitions (server.ts) are built on it.
 */
export const notifierSchema: ServiceSchema & { name: ServiceName } = {
  name: 'notifier',
  migrationsDir: migrationsDirOf(__dirname),
  // The runtime's rate limit counters (the test-event limit), in this service's migration range.
  builtInMigrations: [sqlMigration(40, 'rate_limits', RATE_LIMIT_COUNTERS_DDL)],
};
