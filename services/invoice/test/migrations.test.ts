/** Upgrading a database that already hands out addresses keeps every key's next index. */
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createDb, EVENT_TABLES_MIGRATION, migrate, migrationsDirOf, type Sql } from '@coinvoice/runtime';
import { createTestDatabase, type TestDatabase } from '../../../test/support/infra';

let database: TestDatabase;
let sql: Sql;
const all = migrationsDirOf(path.join(__dirname, '..', 'src'));

beforeAll(async () => {
  database = await createTestDatabase('cvinvmig');
  sql = createDb({ url: database.url, schema: 'invoice', max: 2 });
});
afterAll(async () => {
  await sql?.end();
  await database?.drop();
});

test('0003 turns each key’s counter into a sequence that continues where the counter was', async () => {
  const upTo0002 = mkdtempSync(path.join(tmpdir(), 'invoice-migrations-'));
  try {
    for (const file of readdirSync(all).filter((f) => f < '0003')) copyFileSync(path.join(all, file), path.join(upTo0002, file));
    await migrate(sql, { schema: 'invoice', dir: upTo0002, builtIn: [EVENT_TABLES_MIGRATION] });
  } finally {
    rmSync(upTo0002, { recursive: true, force: true });
  }
  const [key] = await sql<{ id: number }[]>`
    insert into address_keys (key_hash, xpub, next_index) values ('aa', 'tpubExample', 7) returning id`;

  await migrate(sql, { schema: 'invoice', dir: all, builtIn: [EVENT_TABLES_MIGRATION] });
  const [next] = await sql.unsafe(`select nextval('address_index_${key!.id}')::int as index`);
  expect(next!.index).toBe(7);
  const columns = await sql`select column_name from information_schema.columns where table_schema = 'invoice' and table_name = 'address_keys'`;
  expect(columns.map((c) => c.column_name)).not.toContain('next_index');
  // Applying them again is a no-op.
  await expect(migrate(sql, { schema: 'invoice', dir: all, builtIn: [EVENT_TABLES_MIGRATION] })).resolves.toMatchObject({ applied: [] });
});
