/**
 * `node main.js migrate`: a service's migrations, and nothing else of the service. This module and
 * what it imports (config, logging, the database, the migration runner, the runtime's built-in
 * tables) load in ~60 ms; the whole service takes ~650 before it could migrate, and a boot runs four
 * of these (docs/performance.md#starting). A service's main.ts passes its ServiceSchema here before
 * it loads anything else.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { RATE_LIMITS_MIGRATION } from './built-in-migrations';
import { commonSettings, loadConfig, type Env } from './config';
import { createDb } from './db';
import { DEAD_LETTER_EVENTS_MIGRATION, EVENT_TABLES_MIGRATION } from './events/tables';
import { createLogger } from './log';
import { migrate, sqlMigration, type MigrationFile } from './migrations';

// What a service's schema module needs, importable without the rest of the runtime.
export { idempotencyKeysMigration, RATE_LIMIT_COUNTERS_DDL } from './built-in-migrations';
export { RATE_LIMITS_MIGRATION, sqlMigration, type MigrationFile };

/** A service's schema: its name (the schema's), its migration files and the runtime's tables it needs. */
export interface ServiceSchema {
  name: string;
  /** Absolute path of the folder of NNNN_name.sql migrations. */
  migrationsDir: string;
  /**
   * Migrations the runtime supplies besides the event tables (always migration 1), e.g.
   * RATE_LIMITS_MIGRATION for a service that counts rate limits in Postgres.
   */
  builtInMigrations?: MigrationFile[];
}

/** The folder holding the package.json above `dir`: the same answer from src/ (tests) and dist/. */
export function packageRoot(dir: string): string {
  let current = dir;
  while (!existsSync(path.join(current, 'package.json'))) {
    const parent = path.dirname(current);
    if (parent === current) throw new Error(`no package.json above ${dir}`);
    current = parent;
  }
  return current;
}

/** Where a service keeps its plain-SQL migrations: src/store/migrations in its package. */
export function migrationsDirOf(dir: string): string {
  return path.join(packageRoot(dir), 'src', 'store', 'migrations');
}

export async function migrateService(schema: ServiceSchema, env: Env = process.env): Promise<void> {
  const config = loadConfig(
    { APP_ENV: commonSettings.APP_ENV, DATABASE_URL: commonSettings.DATABASE_URL, LOG_LEVEL: commonSettings.LOG_LEVEL },
    env,
  );
  const logger = createLogger({ service: schema.name, level: config.LOG_LEVEL });
  const sql = createDb({ url: config.DATABASE_URL, schema: schema.name, max: 1 });
  try {
    await migrate(sql, {
      schema: schema.name,
      dir: schema.migrationsDir,
      builtIn: [EVENT_TABLES_MIGRATION, DEAD_LETTER_EVENTS_MIGRATION, ...(schema.builtInMigrations ?? [])],
      logger,
    });
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** The `migrate` command: migrates, then exits 0, or 1 with the reason on stderr. */
export function runMigrate(schema: ServiceSchema): void {
  migrateService(schema).then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`${schema.name}: migration failed: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
