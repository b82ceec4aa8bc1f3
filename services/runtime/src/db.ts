/**
 * The Postgres pool of a service (postgres.js). Every service owns exactly one schema (auth,
 * invoice, payout, notifier) and its connections resolve unqualified table names there only, so a
 * query can never reach another service's tables by accident.
 *
 * Money never becomes a JS float: postgres.js leaves `numeric` and `bigint` (int8) as strings —
 * only int2/int4/oid/float4/float8 are parsed to numbers — and this module keeps it that way by
 * not registering parsers for them. A test guards the behaviour.
 */
import postgres from 'postgres';
import type { Logger } from './log';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;
/** Either the pool or a transaction: helpers that only run queries accept both. */
export type Queryable = Sql | TransactionSql;

/** A Postgres identifier we create ourselves and embed in SQL: lower-case, no quoting games. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export function assertSchemaName(schema: string): void {
  if (!SCHEMA_NAME.test(schema)) {
    throw new Error(`invalid schema name ${JSON.stringify(schema)}: expected lower-case letters, digits and _`);
  }
}

export interface DbOptions {
  /** postgres://user:pass@host:port/database */
  url: string;
  /** The service's own schema; becomes the connections' search_path. */
  schema: string;
  /** Pool size. */
  max?: number;
  /** Seconds before an idle connection is closed (default 30). */
  idleTimeoutSeconds?: number;
  /** Seconds to wait for a new connection (default 10). */
  connectTimeoutSeconds?: number;
  /** Shown in pg_stat_activity, e.g. "invoice". */
  applicationName?: string;
  logger?: Logger;
}

export function createDb(options: DbOptions): Sql {
  assertSchemaName(options.schema);
  const logger = options.logger;
  return postgres(options.url, {
    max: options.max ?? 10,
    idle_timeout: options.idleTimeoutSeconds ?? 30,
    connect_timeout: options.connectTimeoutSeconds ?? 10,
    // Sent in the startup packet, so it holds for every connection of the pool, including the
    // ones postgres.js opens for LISTEN and after a reconnect.
    connection: {
      search_path: options.schema,
      application_name: options.applicationName ?? options.schema,
    },
    onnotice: (notice) => logger?.debug({ notice: notice.message, code: notice.code }, 'postgres notice'),
  });
}

/** Rejects when `promise` has not settled within `timeoutMs`. */
function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string, onTimeout?: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout?.();
      reject(new Error(`${what} did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Health check: resolves when Postgres answers `select 1` within `timeoutMs`, rejects otherwise.
 * Fails fast instead of waiting for the pool's connect timeout, so a probe never hangs.
 */
export async function pingDb(sql: Sql, timeoutMs = 2000): Promise<void> {
  const query = sql`select 1 as ok`;
  // A query still queued when the probe gives up is cancelled so it does not pile up behind a
  // dead server.
  await withTimeout(query.execute(), timeoutMs, 'postgres', () => void query.cancel());
}
