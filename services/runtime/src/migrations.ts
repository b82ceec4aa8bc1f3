/**
 * Per-service schema migrations from plain SQL files.
 *
 * `dir` holds `NNNN_name.sql` files (e.g. `0001_init.sql`), applied in version order inside the
 * service's schema, each in its own transaction together with its row in
 * `<schema>.schema_migrations` (version, name, sha-256 checksum). Applying twice is a no-op; an
 * applied file whose content changed is an error naming it (write a new migration instead).
 *
 * Several replicas may start at once: the whole run holds a session-level advisory lock keyed on
 * the schema name, so one process applies and the others wait, then find nothing left to do.
 *
 * An applied file may still be edited when the edit changes nothing it did to a database (a
 * comment, or DDL that another migration now owns and creates only where it is missing): the file
 * then names the checksum it had in a line `-- supersedes sha256:<hex>`, and a database that
 * recorded that checksum takes the file as applied and records the new one.
 *
 * Files must not contain transaction control (BEGIN/COMMIT) or statements that cannot run in a
 * transaction (CREATE INDEX CONCURRENTLY). Unqualified names resolve to the service's schema.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { assertSchemaName, type Sql } from './db';
import type { Logger } from './log';

export interface MigrationFile {
  version: number;
  name: string;
  file: string;
  sql: string;
  checksum: string;
  /** Checksums the migration had before an edit that changes nothing it did (`-- supersedes sha256:`). */
  supersedes: string[];
}

export interface MigrateOptions {
  /** The service's schema, created when missing. */
  schema: string;
  /** Folder of `NNNN_name.sql` files. */
  dir: string;
  /**
   * Migrations the code supplies ahead of the folder's files (the runtime's event tables,
   * EVENT_TABLES_MIGRATION): one source for SQL every service needs, versioned and checksummed
   * like a file, so databases that applied it as a file of their own go on as before.
   */
  builtIn?: MigrationFile[];
  logger?: Logger;
}

export interface MigrateResult {
  /** Files applied by this run, in order. */
  applied: string[];
  /** Files found already applied. */
  skipped: string[];
}

export class MigrationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

const MIGRATION_FILE = /^(\d{4})_([a-z0-9_-]+)\.sql$/;
const SUPERSEDES = /^-- supersedes sha256:([0-9a-f]{64})$/gm;

function migrationOf(version: number, name: string, file: string, sql: string): MigrationFile {
  return {
    version,
    name,
    file,
    sql,
    checksum: createHash('sha256').update(sql).digest('hex'),
    supersedes: [...sql.matchAll(SUPERSEDES)].map((m) => m[1] ?? ''),
  };
}

/**
 * First key of the two-int advisory lock (the second is hashtext(schema)): keeps our lock apart
 * from any other advisory lock that might hash the same schema name. ASCII "cvmg".
 */
const MIGRATION_LOCK_CLASS = 0x63766d67;

/** A migration supplied by code (see MigrateOptions.builtIn), named as its file would be. */
export function sqlMigration(version: number, name: string, sql: string): MigrationFile {
  const file = `${String(version).padStart(4, '0')}_${name}.sql`;
  if (!MIGRATION_FILE.test(file)) throw new MigrationError(`built-in migration ${file} is misnamed: expected NNNN_name`);
  return migrationOf(version, name, file, sql);
}

/** Reads and orders the migration files of `dir`; a `.sql` file with a malformed name is an error. */
export async function readMigrations(dir: string): Promise<MigrationFile[]> {
  const entries = await readdir(dir);
  const migrations: MigrationFile[] = [];
  const byVersion = new Map<number, string>();
  for (const file of entries.sort()) {
    if (!file.endsWith('.sql')) continue;
    const match = MIGRATION_FILE.exec(file);
    if (!match) {
      throw new MigrationError(`migration file ${file} in ${dir} is misnamed: expected NNNN_name.sql (e.g. 0001_init.sql)`);
    }
    const version = Number(match[1]);
    const clash = byVersion.get(version);
    if (clash) throw new MigrationError(`migration files ${clash} and ${file} in ${dir} share version ${version}`);
    byVersion.set(version, file);
    migrations.push(migrationOf(version, match[2] ?? '', file, await readFile(join(dir, file), 'utf8')));
  }
  return migrations.sort((a, b) => a.version - b.version);
}

type ReservedConnection = Awaited<ReturnType<Sql['reserve']>>;

interface AppliedRow {
  version: number;
  name: string;
  checksum: string;
}

export async function migrate(sql: Sql, options: MigrateOptions): Promise<MigrateResult> {
  const { schema, dir, logger } = options;
  assertSchemaName(schema);
  const migrations = [...(options.builtIn ?? []), ...(await readMigrations(dir))];
  for (const [i, migration] of migrations.entries()) {
    const clash = migrations.findIndex((other) => other.version === migration.version);
    if (clash !== i) throw new MigrationError(`migrations ${migrations[clash]?.file} and ${migration.file} (schema ${schema}) share version ${migration.version}`);
  }
  migrations.sort((a, b) => a.version - b.version);
  const log = logger?.child({ schema });

  // One connection for the whole run: the advisory lock is a session lock, and the per-file
  // transactions must run on the session that holds it.
  const conn = await sql.reserve();
  try {
    const lockWait = Date.now();
    await conn`select pg_advisory_lock(${MIGRATION_LOCK_CLASS}::int, hashtext(${schema}))`;
    const waitedMs = Date.now() - lockWait;
    if (waitedMs > 100) log?.info({ waitedMs }, 'migrations: waited for another process holding the lock');
    try {
      await conn.unsafe(`create schema if not exists "${schema}"`);
      await conn.unsafe(
        `create table if not exists "${schema}".schema_migrations (
           version    integer primary key,
           name       text not null,
           checksum   text not null,
           applied_at timestamptz not null default now()
         )`,
      );
      const applied = new Map(
        (await conn.unsafe<AppliedRow[]>(`select version, name, checksum from "${schema}".schema_migrations`)).map(
          (row) => [row.version, row],
        ),
      );

      // Check every applied file before applying anything, so a tampered history stops the run
      // without leaving it half done.
      const superseded: MigrationFile[] = [];
      for (const migration of migrations) {
        const row = applied.get(migration.version);
        if (row && row.checksum !== migration.checksum && migration.supersedes.includes(row.checksum)) {
          superseded.push(migration);
        } else if (row && row.checksum !== migration.checksum) {
          throw new MigrationError(
            `migration ${migration.file} (schema ${schema}) was changed after it was applied: ` +
              `recorded checksum ${row.checksum.slice(0, 12)}…, file now ${migration.checksum.slice(0, 12)}…; ` +
              'add a new migration instead of editing an applied one',
          );
        }
      }
      for (const migration of superseded) {
        await conn.unsafe(`update "${schema}".schema_migrations set checksum = $1 where version = $2`, [migration.checksum, migration.version]);
        log?.info({ migration: migration.file }, 'migrations: an applied file was edited without changing what it did; its new checksum is recorded');
      }
      const known = new Set(migrations.map((m) => m.version));
      for (const row of applied.values()) {
        if (!known.has(row.version)) {
          log?.warn({ version: row.version, name: row.name }, 'migrations: an applied version has no file here (older code?)');
        }
      }

      const result: MigrateResult = { applied: [], skipped: [] };
      for (const migration of migrations) {
        if (applied.has(migration.version)) {
          result.skipped.push(migration.file);
          continue;
        }
        const started = Date.now();
        await applyOne(conn, schema, migration);
        result.applied.push(migration.file);
        log?.info({ migration: migration.file, ms: Date.now() - started }, 'migration applied');
      }
      if (result.applied.length === 0) log?.debug({ files: migrations.length }, 'migrations: up to date');
      return result;
    } finally {
      // A failed unlock means the session is gone, which releases the lock anyway; don't let it
      // hide the error that got us here.
      await conn`select pg_advisory_unlock(${MIGRATION_LOCK_CLASS}::int, hashtext(${schema}))`.catch((err: unknown) =>
        log?.warn({ err }, 'migrations: advisory unlock failed'),
      );
    }
  } finally {
    conn.release();
  }
}

async function applyOne(conn: ReservedConnection, schema: string, migration: MigrationFile): Promise<void> {
  await conn.unsafe('begin');
  try {
    await conn.unsafe(`set local search_path to "${schema}"`);
    // No parameters: postgres.js sends it with the simple query protocol, so a file may hold
    // several statements.
    await conn.unsafe(migration.sql);
    await conn.unsafe(`insert into "${schema}".schema_migrations (version, name, checksum) values ($1, $2, $3)`, [
      migration.version,
      migration.name,
      migration.checksum,
    ]);
    await conn.unsafe('commit');
  } catch (err) {
    await conn.unsafe('rollback').catch(() => undefined);
    const reason = err instanceof Error ? err.message : String(err);
    throw new MigrationError(`migration ${migration.file} (schema ${schema}) failed: ${reason}`, { cause: err });
  }
}
