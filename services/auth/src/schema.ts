import type { ServiceName } from '@coinvoice/runtime';
import { migrationsDirOf, RATE_LIMITS_MIGRATION, type ServiceSchema } from '@coinvoice/runtime/migrate-service';

/**
 * The auth service's schema: all that `main.js migrate` loads (docs/performance.md#starting);
 * the service's definitions (server.ts) are built on it.
 */
export const authSchema: ServiceSchema & { name: ServiceName } = {
  name: 'auth',
  migrationsDir: migrationsDirOf(__dirname),
  // Counters shared by every replica (rate limits that guard secrets), from the runtime.
  builtInMigrations: [RATE_LIMITS_MIGRATION],
};
