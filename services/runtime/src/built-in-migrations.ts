/**
 * The tables the runtime creates in a service's schema besides the event tables (events/tables.ts),
 * as built-in migrations (ServiceDefinition.builtInMigrations). Kept apart from the code that uses
 * them (rate-limit.ts, idempotency.ts): `migrate` loads this module alone (migrate-service.ts,
 * docs/performance.md#starting).
 */
import { sqlMigration, type MigrationFile } from './migrations';

/**
 * The counter table, as migration 5 of each service that counts in Postgres (auth, payout:
 * ServiceDefinition.builtInMigrations). The text, comments included, is what those services kept
 * as their own 0005_rate_limits.sql but for the comment's citation, which names its older checksum
 * (`-- supersedes`): databases that applied the file, or the earlier built-in migration, go on.
 */
export const RATE_LIMIT_COUNTERS_DDL = `-- supersedes sha256:d27652a3b0f4fb88aa29d3779e033ccd31d7327dc53149e220089bfd93b860e0
-- Rate limit counters (docs/architecture.md#rate-limits), shared by every replica: runtime rate-limit.ts
-- (RATE_LIMIT_COUNTERS_DDL) counts here; keys are SHA-256 hashes, never IPs or emails.
create table rate_limit_counters (
  -- policy name ':' SHA-256 of the key
  bucket       text not null,
  window_start timestamptz not null,
  expires_at   timestamptz not null,
  hits         integer not null,
  primary key (bucket, window_start)
);
create index rate_limit_counters_expires_idx on rate_limit_counters (expires_at);
`;

export const RATE_LIMITS_MIGRATION = sqlMigration(5, 'rate_limits', RATE_LIMIT_COUNTERS_DDL);

/** How long an Idempotency-Key is kept (idempotency.ts). */
export const IDEMPOTENCY_RETENTION_HOURS = 24;

/** The version of the built-in migration that creates `idempotency_keys` (IdempotencyKeys.migration). */
export const IDEMPOTENCY_KEYS_MIGRATION_VERSION = 110;

/**
 * The table, for a service whose keys create rows of `table`, named in `<resource>_id`. "If not
 * exists": databases that created it in a migration file of their own (invoice and payout 0002,
 * before this DDL had one owner) have it already, in exactly this shape.
 */
function idempotencyKeysDdl(resource: string, table: string): string {
  return `-- Idempotency-Key of a creating RPC, per project, kept ${IDEMPOTENCY_RETENTION_HOURS} h (runtime idempotency.ts). The row is
-- claimed first in the creating transaction, so a concurrent duplicate waits on the primary key and then replays.
create table if not exists idempotency_keys (
  project_id   uuid not null,
  key          text not null,
  -- sha-256 of the merchant's request fields: the same key with another body is refused.
  request_hash text not null,
  ${resource}_id uuid not null references ${table} (id) deferrable initially deferred,
  -- The first response (the created resource's proto message, binary), replayed as it was.
  response     bytea,
  created_at   timestamptz not null default now(),
  expires_at   timestamptz not null,
  primary key (project_id, key)
);
create index if not exists idempotency_keys_expires_at_idx on idempotency_keys (expires_at);
`;
}

/** The built-in migration that creates `idempotency_keys` for keys creating rows of `table` (IdempotencyKeys.migration). */
export function idempotencyKeysMigration(resource: string, table: string): MigrationFile {
  for (const name of [resource, table]) if (!/^[a-z][a-z0-9_]*$/.test(name)) throw new Error(`invalid SQL name ${JSON.stringify(name)}`);
  return sqlMigration(IDEMPOTENCY_KEYS_MIGRATION_VERSION, 'idempotency_keys', idempotencyKeysDdl(resource, table));
}
