/**
 * A connection that dies under a transaction or a query (backend terminated, Postgres restarted
 * or failed over) fails that work with a catchable error, the process lives on, and the next query
 * on the reconnected connection succeeds. Unpatched, postgres.js 3.4.9 crashes the process (its
 * `rollback` after the failure is a deferred write on a socket that is gone, porsager/postgres#1208)
 * and replays the dead backend's 57P01 onto the first query after reconnecting (#1223); the
 * install-time patch (patches/postgres+3.4.9.patch) fixes both. This test runs a real Node process
 * against a Postgres of its own, through the runtime's createDb and through plain postgres.js,
 * both loading the installed (patched) module as is: nothing is rewritten at run time.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { OwnPostgres } from '../support/own-infra';
import { REPO_ROOT } from '../support/system';

const RUNTIME_DB = path.join(REPO_ROOT, 'services', 'runtime', 'dist', 'db.js');

/**
 * The child (one connection in its pool, so the same connection is reused): transactions whose
 * backend another session terminates, while they run a query and just before they commit; a
 * plain query whose backend is terminated while it runs, and the query after it; then the pool
 * must answer queries again.
 */
const CHILD = `
const guarded = process.env.GUARDED === '1';
const postgres = require(${JSON.stringify(path.join(REPO_ROOT, 'node_modules', 'postgres'))});
const sql = guarded
  ? require(${JSON.stringify(RUNTIME_DB)}).createDb({ url: process.env.PG_URL, schema: 'public', max: 1 })
  : postgres(process.env.PG_URL, { max: 1, onnotice: () => undefined });
const admin = postgres(process.env.PG_URL, { max: 1, onnotice: () => undefined });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  const outcomes = [];
  const scenarios = (process.env.SCENARIOS || 'transactions,replay').split(',');
  for (const when of scenarios.includes('transactions') ? ['mid-transaction', 'before-commit'] : []) {
    try {
      await sql.begin(async (tx) => {
        const [{ pid }] = await tx\`select pg_backend_pid() as pid\`;
        await admin\`select pg_terminate_backend(\${pid})\`;
        await sleep(100);
        if (when === 'mid-transaction') await tx\`select 1\`;
      });
      outcomes.push(when + ': committed?!');
    } catch (err) {
      outcomes.push(when + ': ' + (err.code || err.message));
    }
    // Give postgres.js's own rollback on the dead connection time to run (and crash, unguarded).
    await sleep(300);
  }
  // A plain query whose backend is terminated while it runs; then the next query on the same
  // (only) connection, after it reconnected, must not get the old backend's error.
  if (scenarios.includes('replay')) {
    const running = sql\`select pg_sleep(5)\`.then(() => 'completed?!', (err) => err.code || err.message);
    await sleep(300);
    await admin\`select pg_terminate_backend(pid) from pg_stat_activity where query = 'select pg_sleep(5)'\`;
    outcomes.push('query in flight: ' + (await running));
    const after = await sql\`select 42 as answer\`.then((rows) => String(rows[0].answer), (err) => err.code || err.message);
    outcomes.push('next query: ' + after);
  }
  const started = Date.now();
  for (let i = 0; i < 5; i++) await Promise.all([sql\`select 1\`, sql\`select 2\`]);
  console.log(JSON.stringify({ outcomes, poolAnsweredInMs: Date.now() - started }));
  await sql.end({ timeout: 1 });
  await admin.end({ timeout: 1 });
})().catch((err) => { console.log(JSON.stringify({ failed: String(err) })); process.exit(2); });
`;

let pg: OwnPostgres | undefined;

beforeAll(async () => {
  pg = await OwnPostgres.start();
}, 30_000);

afterAll(async () => {
  await pg?.destroy();
});

function runChild(guarded: boolean, scenarios = 'transactions,replay') {
  const res = spawnSync(process.execPath, ['-e', CHILD], {
    env: { ...process.env, PG_URL: (pg as OwnPostgres).url, GUARDED: guarded ? '1' : '0', SCENARIOS: scenarios },
    encoding: 'utf8',
    timeout: 20_000,
  });
  const line = res.stdout.trim().split('\n').at(-1) ?? '';
  let report: any;
  try {
    report = JSON.parse(line);
  } catch {
    report = undefined;
  }
  return { status: res.status, report, stderr: res.stderr };
}

test.each([
  ['the runtime createDb', true],
  ['plain postgres.js', false],
])('through %s: the failed transactions and the killed query reject with CONNECTION_CLOSED, the process lives, the next query on the reconnected connection succeeds', (_name, viaRuntime) => {
  const run = runChild(viaRuntime);
  expect({ status: run.status, stderr: run.stderr.slice(0, 500) }).toEqual({ status: 0, stderr: '' });
  expect(run.report).toMatchObject({
    outcomes: ['mid-transaction: CONNECTION_CLOSED', 'before-commit: CONNECTION_CLOSED', 'query in flight: CONNECTION_CLOSED', 'next query: 42'],
  });
  expect(run.report.poolAnsweredInMs).toBeLessThan(2_000);
});
