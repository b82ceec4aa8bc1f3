import type { ServiceName } from '@coinvoice/runtime';
import { idempotencyKeysMigration, migrationsDirOf, type ServiceSchema } from '@coinvoice/runtime/migrate-service';

/**
 * The invoice service's schema: all that `main.js migrate` loads (docs/performance.md#starting);
 * the service's definitions (server.ts, the watcher role) are built on it.
 */
export const invoiceSchema: ServiceSchema & { name: ServiceName } = {
  name: 'invoice',
  migrationsDir: migrationsDirOf(__dirname),
  // idempotency_keys, whose one DDL is the runtime's; the keys name rows of invoices (store/idempotency.ts).
  builtInMigrations: [idempotencyKeysMigration('invoice', 'invoices')],
};
