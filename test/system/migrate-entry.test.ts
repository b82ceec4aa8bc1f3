/**
 * `<service> migrate` loads only what migrating needs (docs/performance.md#starting): each service's
 * main.ts hands `migrate` to the runtime's migrate-service.ts with its schema.ts before loading the
 * service. Run for real against a fresh database, with a preload that lists, at exit, every module
 * the process loaded: none of the service's own code, and none of the RPC, NATS or chain libraries.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { invoiceSchema } from '../../services/invoice/src/schema';
import { invoiceIdempotencyKeys } from '../../services/invoice/src/store/idempotency';
import { payoutSchema } from '../../services/payout/src/schema';
import { payoutIdempotencyKeys } from '../../services/payout/src/store/idempotency';
import { createTestDatabase, type TestDatabase } from '../support/infra';
import { REPO_ROOT } from '../support/system';

const run = promisify(execFile);
const SERVICES = ['auth', 'invoice', 'payout', 'notifier'] as const;

let database: TestDatabase;
let scratch: string;
beforeAll(async () => {
  database = await createTestDatabase('cvmigrate');
  scratch = mkdtempSync(path.join(tmpdir(), 'coinvoice-migrate-entry-'));
});
afterAll(async () => {
  await database?.drop();
  rmSync(scratch, { recursive: true, force: true });
});

test.each(SERVICES)('%s migrate migrates, loading only the migration code', async (service) => {
  const listFile = path.join(scratch, `${service}.json`);
  const preload = path.join(scratch, `${service}-preload.js`);
  writeFileSync(preload, `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(listFile)}, JSON.stringify(Object.keys(require.cache))));\n`);
  await run(process.execPath, ['--require', preload, path.join(REPO_ROOT, 'services', service, 'dist', 'main.js'), 'migrate'], {
    env: { ...process.env, DATABASE_URL: database.url, LOG_LEVEL: 'warn' },
  });
  const sql = postgres(database.url, { max: 1, onnotice: () => undefined });
  try {
    const [applied] = await sql<{ n: number }[]>`select count(*)::int as n from ${sql(service)}.schema_migrations`;
    expect(applied?.n).toBeGreaterThan(5);
  } finally {
    await sql.end();
  }

  const loaded = (JSON.parse(readFileSync(listFile, 'utf8')) as string[]).map((file) => path.relative(REPO_ROOT, file));
  const ownCode = loaded.filter((file) => file.startsWith(`services/${service}/`)).map((file) => path.basename(file)).sort();
  expect(ownCode).toEqual(['main.js', 'schema.js']);
  const heavy = loaded.filter((file) => /node_modules\/(@grpc|@connectrpc|@bufbuild|nats|@noble|@scure|viem|fastify|prom-client)\//.test(file));
  expect(heavy).toEqual([]);
  // The whole of it: the runtime's config, logging, database and migration modules and their libraries.
  expect(loaded.length).toBeLessThan(80);
});

test('the idempotency_keys a schema creates are the ones its service writes (the same resource and table)', () => {
  expect(invoiceSchema.builtInMigrations).toContainEqual(invoiceIdempotencyKeys.migration);
  expect(payoutSchema.builtInMigrations).toContainEqual(payoutIdempotencyKeys.migration);
});
