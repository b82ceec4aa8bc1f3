/**
 * The Postgres pool of a service (postgres.js). Every service owns exactly one schema (auth,
 * invoice, payout, notifier) and its connections resolve unqualified table names there only, so a
 * query can never reach another service's tables by accident.
 *
 * Money never becomes a JS float: postgres.js leaves `numeric` and `bigint` (int8) as strings —
 * only int2/int4/oid/float4/float8 are parsed to numbers — and this module keeps it that way by
 * not registering parsers for them. A test guards the behaviour.
 */
// postgres.js is pinned to 3.4.9 and patched at install time (patches/postgres+3.4.9.patch,
// patches/README.md): without it a Postgres restart crashes the process.
import postgres from 'postgres';
import type { Logger } from './log';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;
/** A query not yet run, to embed in another (`sql`${fragment}``): a CTE, a condition. */
export type SqlFragment = postgres.PendingQuery<postgres.Row[]>;
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

/**
 * Seconds a pool connection waits before its next connection attempt after `retries` failed ones
 * in a row. postgres.js's default grows to 10–20 s after a handful of failures (3^retries / 100),
 * and every query waiting for that connection waits as long: while Postgres is down calls hang
 * instead of failing, and once it is back the pool stays away for up to 20 s more. Capped at half
 * a second (with jitter, so replicas do not retry in step), a query fails promptly while the
 * server is gone and the pool reconnects within a fraction of a second once it answers again.
 */
export function reconnectBackoffSeconds(retries: number): number {
  return Math.min(0.05 * 2 ** Math.max(0, retries - 1), 0.5) * (0.5 + Math.random() / 2);
}

export function createDb(options: DbOptions): Sql {
  assertSchemaName(options.schema);
  const logger = options.logger;
  return postgres(options.url, {
    max: options.max ?? 10,
    idle_timeout: options.idleTimeoutSeconds ?? 30,
    connect_timeout: options.connectTimeoutSeconds ?? 10,
    backoff: reconnectBackoffSeconds,
    // Sent in the startup packet, so it holds for every connection of the pool, including the
    // ones postgres.js opens for LISTEN and after a reconnect.
    connection: {
      search_path: options.schema,
      application_name: options.applicationName ?? options.schema,
    },
    onnotice: (notice) => logger?.debug({ notice: notice.message, code: notice.code }, 'postgres notice'),
  });
}

/** Socket errors of a connection to Postgres that failed or broke. */
const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  // postgres.js's own
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);

/** SQLSTATEs saying the server is going away or not there yet (not that the query was wrong). */
const UNAVAILABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown: a restart (fast shutdown) terminated the session
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: starting up, shutting down, in recovery
  '53300', // too_many_connections
]);

/**
 * True when `err` means Postgres cannot be reached right now (refused, dropped, restarting), as
 * opposed to a query that failed on its own: such failures answer Unavailable (HTTP 503), so a
 * client retries, instead of an internal error.
 */
export function isDatabaseUnavailableError(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 3) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (CONNECTION_ERROR_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code)) return true;
    // Class 08: connection exception (08000, 08001, 08003, 08004, 08006, …).
    if (/^08[0-9A-Z]{3}$/.test(code) && (err as { name?: unknown }).name === 'PostgresError') return true;
  }
  // Several addresses tried (AggregateError), or a wrapped cause.
  const nested = (err as { errors?: unknown }).errors;
  if (Array.isArray(nested) && nested.some((e) => isDatabaseUnavailableError(e, depth + 1))) return true;
  return isDatabaseUnavailableError((err as { cause?: unknown }).cause, depth + 1);
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
