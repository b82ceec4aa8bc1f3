/**
 * Migrations and the service pool against a real Postgres (a database of this file's own).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createDb, pingDb, type Sql } from '../src/db';
import { migrate, MigrationError } from '../src/migrations';
import { commonSettings, loadConfig } from '../src/config';
import { processedEventsRetention } from '../src/events/consumer';
import { EVENT_TABLES_DDL, EVENT_TABLES_MIGRATION } from '../src/events/tables';
import { RATE_LIMIT_COUNTERS_DDL, RATE_LIMITS_MIGRATION } from '../src/built-in-migrations';
import { IdempotencyKeys } from '../src/idempotency';
import { createLogger } from '../src/log';
import { createTestDatabase, type TestDatabase } from '../../../test/support/infra';

const REPO_ROOT = path.resolve(__dirname, '../../..');
const SRC = path.resolve(__dirname, '../src');

let database: TestDatabase;
let workDir: string;
const pools: Sql[] = [];

function pool(schema: string): Sql {
  const sql = createDb({ url: database.url, schema, max: 4 });
  pools.push(sql);
  return sql;
}

/** A fresh folder holding `files` (name → SQL). */
function migrationsDir(name: string, files: Record<string, string>): string {
  const dir = path.join(workDir, name);
  mkdirSync(dir, { recursive: true });
  for (const [file, sql] of Object.entries(files)) writeFileSync(path.join(dir, file), sql);
  return dir;
}

async function tablesIn(sql: Sql, schema: string): Promise<string[]> {
  const rows = await sql<{ table_name: string }[]>`
    select table_name from information_schema.tables where table_schema = ${schema} order by table_name`;
  return rows.map((r) => r.table_name);
}

beforeAll(async () => {
  database = await createTestDatabase('cvmig');
  workDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-migrations-'));
});

afterAll(async () => {
  await Promise.all(pools.map((sql) => sql.end({ timeout: 5 })));
  await database?.drop();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

describe('migrate', () => {
  it('applies the files in version order inside the service schema, and a second run is a no-op', async () => {
    const sql = pool('invoice');
    const dir = migrationsDir('in-order', {
      // Order matters: 0002 needs 0001's table and 0010 renames the column 0002 adds.
      '0010_rename.sql': 'alter table widgets rename column label to name;',
      '0001_init.sql': 'create table widgets (id bigint primary key, price numeric(20, 8) not null);',
      '0002_seed.sql': "alter table widgets add column label text;\ninsert into widgets values (1, 0.1, 'first');",
    });

    const first = await migrate(sql, { schema: 'invoice', dir });
    expect(first.applied).toEqual(['0001_init.sql', '0002_seed.sql', '0010_rename.sql']);
    expect(await tablesIn(sql, 'invoice')).toEqual(['schema_migrations', 'widgets']);
    expect(await tablesIn(sql, 'public')).toEqual([]);

    const second = await migrate(sql, { schema: 'invoice', dir });
    expect(second).toEqual({ applied: [], skipped: ['0001_init.sql', '0002_seed.sql', '0010_rename.sql'] });
    // The seed ran once: a re-run would have inserted a duplicate key or a second row.
    expect(await sql`select id, price, name from widgets`).toEqual([{ id: '1', price: '0.10000000', name: 'first' }]);
    const recorded = await sql<{ version: number; name: string; checksum: string }[]>`
      select version, name, checksum from invoice.schema_migrations order by version`;
    expect(recorded.map((r) => [r.version, r.name])).toEqual([
      [1, 'init'],
      [2, 'seed'],
      [10, 'rename'],
    ]);
    for (const row of recorded) expect(row.checksum).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses to run when an applied file changed, naming the file, and applies nothing else', async () => {
    const sql = pool('payout');
    const dir = migrationsDir('changed', {
      '0001_init.sql': 'create table holds (id bigint primary key);',
      '0002_more.sql': 'create table more_holds (id bigint primary key);',
    });
    await migrate(sql, { schema: 'payout', dir });

    writeFileSync(path.join(dir, '0002_more.sql'), 'create table more_holds (id bigint primary key, note text);');
    writeFileSync(path.join(dir, '0003_next.sql'), 'create table next_holds (id bigint primary key);');
    const run = migrate(sql, { schema: 'payout', dir });
    await expect(run).rejects.toThrow(MigrationError);
    await expect(run).rejects.toThrow(/0002_more\.sql.*changed after it was applied/);
    expect(await tablesIn(sql, 'payout')).toEqual(['holds', 'more_holds', 'schema_migrations']);
  });

  it('takes an edited applied file as applied when it names the checksum it had (-- supersedes), and records the new one', async () => {
    const sql = pool('superseded');
    const before = '-- Holds (see the design notes)\ncreate table holds (id bigint primary key);\n';
    const dir = migrationsDir('superseded', { '0001_init.sql': before });
    await migrate(sql, { schema: 'superseded', dir });
    const checksumOf = async () => (await sql<{ checksum: string }[]>`select checksum from superseded.schema_migrations where version = 1`)[0]?.checksum;
    const old = await checksumOf();
    expect(old).toMatch(/^[0-9a-f]{64}$/);

    // Another old checksum does not do: the file must name the one this database recorded.
    const stranger = `-- supersedes sha256:${'0'.repeat(64)}\n-- Holds (docs/architecture.md)\ncreate table holds (id bigint primary key);\n`;
    writeFileSync(path.join(dir, '0001_init.sql'), stranger);
    await expect(migrate(sql, { schema: 'superseded', dir })).rejects.toThrow(/0001_init\.sql.*changed after it was applied/);

    const after = `-- supersedes sha256:${old}\n-- Holds (docs/architecture.md)\ncreate table holds (id bigint primary key);\n`;
    writeFileSync(path.join(dir, '0001_init.sql'), after);
    writeFileSync(path.join(dir, '0002_next.sql'), 'create table next_holds (id bigint primary key);');
    await expect(migrate(sql, { schema: 'superseded', dir })).resolves.toEqual({ applied: ['0002_next.sql'], skipped: ['0001_init.sql'] });
    expect(await checksumOf()).not.toBe(old);
    // The new checksum is the one recorded: the next run is a plain no-op.
    await expect(migrate(sql, { schema: 'superseded', dir })).resolves.toEqual({ applied: [], skipped: ['0001_init.sql', '0002_next.sql'] });
    expect(await tablesIn(sql, 'superseded')).toEqual(['holds', 'next_holds', 'schema_migrations']);
  });

  it('runs each file in its own transaction: a failing file leaves nothing behind and names itself', async () => {
    const sql = pool('notifier');
    const dir = migrationsDir('failing', {
      '0001_ok.sql': 'create table deliveries (id bigint primary key);',
      '0002_broken.sql': 'create table attempts (id bigint primary key);\nselect 1 / 0;',
    });
    await expect(migrate(sql, { schema: 'notifier', dir })).rejects.toThrow(/0002_broken\.sql.*division by zero/);
    expect(await tablesIn(sql, 'notifier')).toEqual(['deliveries', 'schema_migrations']);
    expect(await sql`select version from notifier.schema_migrations`).toEqual([{ version: 1 }]);
  });

  it('rejects a misnamed .sql file instead of skipping it', async () => {
    const dir = migrationsDir('misnamed', { '1_init.sql': 'select 1;' });
    await expect(migrate(pool('auth'), { schema: 'auth', dir })).rejects.toThrow(/1_init\.sql.*NNNN_name\.sql/);
  });

  it('two processes migrating at the same moment both succeed and record each version once', async () => {
    const schema = 'race';
    const dir = migrationsDir('race', {
      // Slow first file, so the two runs overlap; plain CREATE TABLE fails if both apply it.
      '0001_slow.sql': 'select pg_sleep(0.5);\ncreate table accounts (id bigint primary key);',
      '0002_ledger.sql': 'create table ledger (id bigint primary key, account_id bigint references accounts);',
      '0003_seed.sql': 'insert into accounts values (1);',
    });

    // Each child compiles the runtime's TypeScript sources with @swc/core on require, opens its
    // own pool with createDb, says "ready", and runs migrate() when told "go" on stdin.
    const childCode = `
      const swc = require('@swc/core');
      require.extensions['.ts'] = (module, filename) => {
        const { code } = swc.transformFileSync(filename, {
          jsc: { target: 'es2023', parser: { syntax: 'typescript' } },
          module: { type: 'commonjs' },
        });
        module._compile(code, filename);
      };
      const { createDb } = require(${JSON.stringify(path.join(SRC, 'db.ts'))});
      const { migrate } = require(${JSON.stringify(path.join(SRC, 'migrations.ts'))});
      const sql = createDb({ url: process.env.DATABASE_URL, schema: ${JSON.stringify(schema)}, max: 2 });
      process.stdout.write('ready\\n');
      process.stdin.once('data', () => {
        const started = Date.now();
        migrate(sql, { schema: ${JSON.stringify(schema)}, dir: ${JSON.stringify(dir)} }).then(
          async (result) => {
            process.stdout.write(JSON.stringify({ ...result, ms: Date.now() - started }) + '\\n');
            await sql.end({ timeout: 5 });
            process.exit(0);
          },
          (err) => {
            process.stderr.write(String(err && err.stack || err) + '\\n');
            process.exit(1);
          },
        );
      });`;

    const children = [0, 1].map(() => {
      const child = spawn(process.execPath, ['-e', childCode], {
        cwd: REPO_ROOT,
        env: { ...process.env, DATABASE_URL: database.url },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const ready = new Promise<void>((resolve, reject) => {
        const onData = () => stdout.includes('ready\n') && resolve();
        child.stdout.on('data', onData);
        child.once('exit', (code) => reject(new Error(`child exited (${code}) before ready: ${stderr}`)));
      });
      const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
        child.once('exit', (code) => resolve({ code, stdout, stderr })),
      );
      return { child, ready, exited };
    });

    await Promise.all(children.map((c) => c.ready));
    for (const { child } of children) child.stdin.write('go\n');
    const results = await Promise.all(children.map((c) => c.exited));

    for (const result of results) expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });
    const reports = results.map(
      (r) => JSON.parse(r.stdout.split('\n').filter(Boolean).pop() ?? '{}') as { applied: string[]; skipped: string[]; ms: number },
    );
    // One process applied everything; the other waited on the lock and found nothing to do.
    const appliedCounts = reports.map((r) => r.applied.length).sort();
    expect(appliedCounts).toEqual([0, 3]);
    const waiter = reports.find((r) => r.applied.length === 0);
    expect(waiter?.skipped).toEqual(['0001_slow.sql', '0002_ledger.sql', '0003_seed.sql']);

    const sql = pool(schema);
    expect(await sql`select version from race.schema_migrations order by version`).toEqual([
      { version: 1 },
      { version: 2 },
      { version: 3 },
    ]);
    expect(await sql`select count(*)::int as n from accounts`).toEqual([{ n: 1 }]);
  });
});

describe('createDb', () => {
  it("resolves unqualified names in the service's own schema only", async () => {
    const sql = pool('auth');
    await sql`create schema if not exists auth`;
    expect(await sql`select current_schema() as schema`).toEqual([{ schema: 'auth' }]);
    const [setting] = await sql<{ search_path: string }[]>`show search_path`;
    expect(setting?.search_path).toBe('auth');
  });

  it('returns numeric and bigint as exact strings, never floats', async () => {
    const sql = pool('auth');
    const [row] = await sql`
      select 0.1::numeric + 0.2::numeric as sum,
             12345678901234567.12345678::numeric(30, 8) as big,
             9007199254740993::bigint as past_float`;
    expect(row).toEqual({ sum: '0.3', big: '12345678901234567.12345678', past_float: '9007199254740993' });
  });

  it('pingDb answers when Postgres does and fails fast when the server does not answer', async () => {
    await expect(pingDb(pool('auth'))).resolves.toBeUndefined();

    // A server that accepts connections and never says a word: a hung Postgres.
    const sockets: Socket[] = [];
    const silent: Server = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const hung = createDb({ url: `postgres://postgres@127.0.0.1:${port}/none`, schema: 'auth', max: 1 });
    try {
      const started = Date.now();
      await expect(pingDb(hung, 300)).rejects.toThrow(/did not answer within 300 ms/);
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      await hung.end({ timeout: 0 });
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe('the event tables from one source (EVENT_TABLES_MIGRATION)', () => {
  it('a database that applied them as a service file of its own (0001_event_tables.sql) goes on as before', async () => {
    const sql = pool('legacy_events');
    // What every service kept as its first migration before the runtime supplied it.
    const before = migrationsDir('legacy-events', { '0001_event_tables.sql': EVENT_TABLES_DDL, '0002_things.sql': 'create table things (id int);' });
    await migrate(sql, { schema: 'legacy_events', dir: before });

    const after = migrationsDir('events-built-in', { '0002_things.sql': 'create table things (id int);', '0003_more.sql': 'create table more (id int);' });
    await expect(migrate(sql, { schema: 'legacy_events', dir: after, builtIn: [EVENT_TABLES_MIGRATION] })).resolves.toEqual({
      applied: ['0003_more.sql'],
      skipped: ['0001_event_tables.sql', '0002_things.sql'],
    });
  });

  it('a new database gets them as migration 1, and a folder that still has a version 1 is refused', async () => {
    const sql = pool('fresh_events');
    const dir = migrationsDir('fresh-events', { '0002_things.sql': 'create table things (id int);' });
    await expect(migrate(sql, { schema: 'fresh_events', dir, builtIn: [EVENT_TABLES_MIGRATION] })).resolves.toMatchObject({
      applied: ['0001_event_tables.sql', '0002_things.sql'],
    });
    expect(await tablesIn(sql, 'fresh_events')).toEqual(['outbox', 'processed_events', 'schema_migrations', 'things']);

    const clash = migrationsDir('clash-events', { '0001_init.sql': 'select 1;' });
    await expect(migrate(pool('clash_events'), { schema: 'clash_events', dir: clash, builtIn: [EVENT_TABLES_MIGRATION] })).rejects.toThrow(/share version 1/);
  });

  it('no service keeps a copy of the event-table DDL among its migration files', () => {
    for (const service of ['auth', 'invoice', 'payout', 'notifier']) {
      const dir = path.join(REPO_ROOT, 'services', service, 'src', 'store', 'migrations');
      for (const file of readdirSync(dir)) expect(readFileSync(path.join(dir, file), 'utf8')).not.toMatch(/create table (outbox|processed_events)\b/);
    }
  });
});

describe('the rate-limit counters from one source (RATE_LIMITS_MIGRATION)', () => {
  it('a database that applied them as 0005_rate_limits.sql of its own goes on as before; a new one gets them', async () => {
    const legacy = pool('legacy_limits');
    await migrate(legacy, { schema: 'legacy_limits', dir: migrationsDir('legacy-limits', { '0005_rate_limits.sql': RATE_LIMIT_COUNTERS_DDL }), builtIn: [EVENT_TABLES_MIGRATION] });
    await expect(
      migrate(legacy, { schema: 'legacy_limits', dir: migrationsDir('limits-built-in', { '0006_more.sql': 'create table more (id int);' }), builtIn: [EVENT_TABLES_MIGRATION, RATE_LIMITS_MIGRATION] }),
    ).resolves.toEqual({ applied: ['0006_more.sql'], skipped: ['0001_event_tables.sql', '0005_rate_limits.sql'] });

    const fresh = pool('fresh_limits');
    await migrate(fresh, { schema: 'fresh_limits', dir: migrationsDir('fresh-limits', {}), builtIn: [EVENT_TABLES_MIGRATION, RATE_LIMITS_MIGRATION] });
    expect(await tablesIn(fresh, 'fresh_limits')).toEqual(['outbox', 'processed_events', 'rate_limit_counters', 'schema_migrations']);
  });

  it('no service keeps a copy of the counter DDL among its migration files', () => {
    for (const service of ['auth', 'invoice', 'payout', 'notifier']) {
      const dir = path.join(REPO_ROOT, 'services', service, 'src', 'store', 'migrations');
      for (const file of readdirSync(dir)) expect(readFileSync(path.join(dir, file), 'utf8')).not.toMatch(/create table rate_limit_counters\b/);
    }
  });
});

describe('idempotency_keys from one source (IdempotencyKeys.migration)', () => {
  const keys = new IdempotencyKeys('widget', 'widgets');
  const widgets = 'create table widgets (id uuid primary key);';

  /** The table as Postgres describes it: columns, constraints and indexes. */
  async function shapeOf(sql: Sql, schema: string): Promise<unknown> {
    return {
      columns: await sql`select column_name, data_type, is_nullable, column_default from information_schema.columns
                         where table_schema = ${schema} and table_name = 'idempotency_keys' order by ordinal_position`,
      constraints: (await sql<{ conname: string; def: string }[]>`select conname, pg_get_constraintdef(oid) as def from pg_constraint
                         where conrelid = ${schema + '.idempotency_keys'}::regclass order by conname`).map((c) => ({ ...c, def: c.def.replaceAll(`${schema}.`, '') })),
      indexes: (await sql<{ indexdef: string }[]>`select indexdef from pg_indexes where schemaname = ${schema} and tablename = 'idempotency_keys' order by indexname`).map((i) =>
        i.indexdef.replaceAll(`${schema}.`, ''),
      ),
    };
  }

  it('a database that created the table in a file of its own keeps it and its rows; a new one gets the same table', async () => {
    // What invoice and payout 0002 did before the DDL had one owner: the same table, created by the file.
    const legacy = pool('legacy_idem');
    const legacyDir = migrationsDir('legacy-idem', { '0002_widgets.sql': `${widgets}\n${keys.migration.sql.replaceAll(' if not exists', '')}` });
    await migrate(legacy, { schema: 'legacy_idem', dir: legacyDir });
    await legacy.begin(async (tx) => {
      await tx`insert into widgets (id) values ('6f0e7c1a-5b0c-4d8e-9a43-1f7f3c2b9e10')`;
      expect(await keys.claim(tx, { projectId: '0a7c1f5e-2d4b-4e8a-9c61-3b5d7e9f1a20', key: 'k1', requestHash: 'h', resourceId: '6f0e7c1a-5b0c-4d8e-9a43-1f7f3c2b9e10' })).toBe(true);
    });
    await expect(migrate(legacy, { schema: 'legacy_idem', dir: legacyDir, builtIn: [keys.migration] })).resolves.toEqual({
      applied: ['0110_idempotency_keys.sql'],
      skipped: ['0002_widgets.sql'],
    });
    expect(await legacy`select key, widget_id from idempotency_keys`).toEqual([{ key: 'k1', widget_id: '6f0e7c1a-5b0c-4d8e-9a43-1f7f3c2b9e10' }]);

    const fresh = pool('fresh_idem');
    await migrate(fresh, { schema: 'fresh_idem', dir: migrationsDir('fresh-idem', { '0002_widgets.sql': widgets }), builtIn: [keys.migration] });
    expect(await shapeOf(fresh, 'fresh_idem')).toEqual(await shapeOf(legacy, 'legacy_idem'));
    expect(JSON.stringify(await shapeOf(fresh, 'fresh_idem'))).toContain('FOREIGN KEY (widget_id) REFERENCES widgets(id) DEFERRABLE INITIALLY DEFERRED');
  });

  it('no service keeps a copy of the idempotency_keys DDL among its migration files', () => {
    for (const service of ['auth', 'invoice', 'payout', 'notifier']) {
      const dir = path.join(REPO_ROOT, 'services', service, 'src', 'store', 'migrations');
      for (const file of readdirSync(dir)) expect(readFileSync(path.join(dir, file), 'utf8')).not.toMatch(/create table (if not exists )?idempotency_keys\b/);
    }
  });
});

describe('processed_events retention (processedEventsRetention)', () => {
  it('deletes records past the retention, oldest first in bounded batches, and keeps the rest', async () => {
    const sql = pool('retention');
    await migrate(sql, { schema: 'retention', dir: migrationsDir('retention', {}), builtIn: [EVENT_TABLES_MIGRATION] });
    await sql`
      insert into processed_events (consumer_name, event_id, processed_at)
      select 'c', 'old-' || i, now() - interval '40 days' - i * interval '1 minute' from generate_series(1, 5) i`;
    await sql`insert into processed_events (consumer_name, event_id, processed_at) values ('c', 'recent', now() - interval '1 day')`;
    const pruner = processedEventsRetention({ sql, logger: createLogger({ service: 'test', level: 'silent' }), retentionMs: 35 * 86_400_000, batchSize: 3 });
    expect(await pruner.processBatch()).toBe(3);
    expect(await pruner.processBatch()).toBe(2);
    expect(await pruner.processBatch()).toBe(0);
    expect((await sql`select event_id from processed_events`).map((r) => r.event_id)).toEqual(['recent']);
  });

  it('the retention is a validated setting, 35 days by default', () => {
    expect(loadConfig(commonSettings, {}).PROCESSED_EVENTS_RETENTION_DAYS).toBe(35);
    expect(() => loadConfig(commonSettings, { PROCESSED_EVENTS_RETENTION_DAYS: '0' })).toThrow(/PROCESSED_EVENTS_RETENTION_DAYS/);
  });
});
