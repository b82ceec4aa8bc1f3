/**
 * `npm run bench:scale`: create, get and sandbox pay with BENCH_STORED_INVOICES (default
 * 10,000,000) invoices stored and BENCH_OPEN_INVOICES (default 20,000) of them open, against the
 * same system with an empty database (docs/performance.md#cost-as-data-grows).
 *
 * 1. The system starts on a fresh database; create, get and pay are loaded (`npm run bench`'s load);
 *    pay pays the invoices the create load made, each once.
 * 2. The stored invoices are written straight into `invoice.invoices` with COPY (not through the
 *    API: 10M creations would take hours): a year of history over 10,000 projects, a tenth of it
 *    the bench's own project, expired or paid, each with a unique address; the last
 *    BENCH_OPEN_INVOICES of them created within the hour and still Waiting (a merchant with 1-hour
 *    invoices and 5 checkouts a second has 18,000 open).
 * 3. Create, get and pay are loaded again; get reads random stored invoices of the bench's project.
 * 4. The tables that must not grow with load (outbox, idempotency keys, rate-limit counters) are
 *    counted after each phase.
 * The section between `<!-- scale -->` markers in bench/results.md is rewritten.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import postgres from 'postgres';
import { startSystem, type RunningSystem } from '@coinvoice/local';
import { benchInfrastructure, runBenchmark } from './infrastructure';
import { cpuPerRequest, sampleCpu } from './cpu-accounting';
import { CONNECTIONS, load, SECONDS, servedPerSecond } from './load';
import { RESULTS_FILE } from './results-file';
import { signUp } from './sign-up';

const STORED = Number(process.env.BENCH_STORED_INVOICES ?? 10_000_000);
const OPEN = Math.min(STORED, Number(process.env.BENCH_OPEN_INVOICES ?? 20_000));
const OTHER_PROJECTS = 10_000;
const BODY = JSON.stringify({ priceAmount: '19.90', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://example.com/ok', cancelUrl: 'https://example.com/cancel', orderId: 'bench' });
/** Stored invoices' address indexes start here, far past what the key's sequence hands out in a run. */
const STORED_INDEX_BASE = 1_000_000_000;

interface Phase {
  name: string;
  createPerSecond: number;
  createCpu: string;
  getPerSecond: number;
  getCpu: string;
  payPerSecond: number;
  payCpu: string;
  bounded: Record<string, number>;
}

async function json(url: string, init: RequestInit): Promise<Record<string, unknown>> {
  return (await (await fetch(url, init)).json()) as Record<string, unknown>;
}

/** COPY rows of `invoice.invoices`, generated as they are written. */
function storedInvoiceRows(count: number, benchProject: string, keyId: number): Readable {
  const projects = Array.from({ length: OTHER_PROJECTS }, () => randomUUID());
  const yearMs = 365 * 24 * 3600_000;
  const start = Date.now() - yearMs;
  let i = 0;
  return new Readable({
    read() {
      const lines: string[] = [];
      for (let n = 0; n < 5_000 && i < count; n++, i++) {
        const project = i % 10 === 0 ? benchProject : projects[i % OTHER_PROJECTS]!;
        // The last `open` rows: created within the past hour, Waiting until an hour after.
        const open = i >= count - OPEN;
        const created = open ? new Date(Date.now() - 3600_000 + Math.floor(((i - (count - OPEN)) / OPEN) * 3600_000)) : new Date(start + Math.floor((i / count) * yearMs));
        const expired = new Date(created.getTime() + 3600_000 + (open ? 3600_000 : 0));
        const paid = !open && i % 3 === 0;
        const id = randomUUID();
        lines.push(
          [
            id, project, 'sandbox', 'Stored Shop', `order-${i}`, '\\N', '19.90', 'USD', '19.90', 'BTC', 'bitcoin', '95000', '{static}', '\\N',
            '0.00020948', paid ? '0.00020948' : '0', paid ? 'Paid' : open ? 'Waiting' : 'Expired', `bcrt1stored${i.toString(36)}`, String(keyId), String(STORED_INDEX_BASE + i),
            'https://example.com/ok', 'https://example.com/cancel', 'f', paid ? randomBytes(32).toString('hex') : '\\N',
            created.toISOString(), expired.toISOString(), paid ? new Date(created.getTime() + 60_000).toISOString() : '\\N', '0', '0',
          ].join('\t'),
        );
      }
      this.push(lines.length > 0 ? `${lines.join('\n')}\n` : null);
    },
  });
}

async function main(): Promise<void> {
  const infra = await benchInfrastructure('scale');
  const mailbox = path.join(infra.dataDir, 'mailbox');
  let system: RunningSystem | undefined;
  const db = postgres(infra.databaseUrl, { max: 2, onnotice: () => undefined });
  try {
    system = await startSystem({
      databaseUrl: infra.databaseUrl,
      natsUrl: infra.natsUrl,
      logDir: path.join(infra.dataDir, 'logs'),
      eventKeyDir: path.join(infra.dataDir, 'event-keys'),
      gatewayPort: 0,
      env: { ...process.env, EVENT_NAMESPACE: `scale${randomBytes(3).toString('hex')}`, LOG_LEVEL: 'warn', RATE_LIMIT_API_PER_KEY: '100000000/1m', SMTP_URL: '', MAILBOX_DIR: mailbox },
    });
    const gw = system.gatewayUrl;
    const token = await signUp(gw, mailbox, { email: `scale-${randomBytes(4).toString('hex')}@example.com`, password: 'bench-password-1', name: 'Scale' });
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const project = await json(`${gw}/api/merchant/projects`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'Scale', environment: 'sandbox' }) });
    const key = await json(`${gw}/api/merchant/projects/${String(project.id)}/api-keys`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'scale' }) });
    const apiKey = String(key.key);
    const headers = { 'x-api-key': apiKey, 'content-type': 'application/json' };
    const processes = {
      ...Object.fromEntries(Object.entries(system.describe()).map(([name, info]) => [name, info.pid])),
      'load generator': process.pid,
    };

    const bounded = async (): Promise<Record<string, number>> => {
      const count = async (table: string) => Number((await db.unsafe<{ n: string }[]>(`select count(*) as n from ${table}`))[0]!.n);
      return {
        'invoice.outbox': await count('invoice.outbox'),
        'invoice.idempotency_keys': await count('invoice.idempotency_keys'),
        'auth.rate_limit_counters': await count('auth.rate_limit_counters'),
        'payout.rate_limit_counters': await count('payout.rate_limit_counters'),
      };
    };

    const phase = async (name: string, getIds: () => string[]): Promise<Phase> => {
      await load({ url: `${gw}/api/invoice`, method: 'POST', headers, body: BODY, duration: Math.min(2, SECONDS) });
      const created: string[] = [];
      const beforeCreate = sampleCpu(processes);
      const create = await load({
        url: `${gw}/api/invoice`,
        method: 'POST',
        headers,
        body: BODY,
        setupClient: (client) =>
          client.on('body', (buf: Buffer) => {
            const id = (JSON.parse(buf.toString()) as { id?: string }).id;
            if (id) created.push(id);
          }),
      });
      const createCpu = cpuPerRequest(beforeCreate, sampleCpu(processes), create['2xx']);
      const ids = getIds().length > 0 ? getIds() : created;
      const getRandom = [{ method: 'GET' as const, setupRequest: (req: object) => ({ ...req, path: `/api/invoice/${ids[Math.floor(Math.random() * ids.length)]!}`, headers: { 'x-api-key': apiKey } }) }];
      await load({ url: gw, requests: getRandom, duration: Math.min(2, SECONDS) });
      const beforeGet = sampleCpu(processes);
      const get = await load({ url: gw, requests: getRandom });
      const getCpu = cpuPerRequest(beforeGet, sampleCpu(processes), get['2xx']);
      // Each invoice the create load made is paid once, in the order made.
      let next = 0;
      const payEach = [{ method: 'POST' as const, setupRequest: (req: object) => ({ ...req, path: `/api/invoice/${created[next++ % created.length]!}/sandbox/pay`, headers: { 'x-api-key': apiKey } }) }];
      const beforePay = sampleCpu(processes);
      const pay = await load({ url: gw, requests: payEach, amount: created.length });
      const payCpu = cpuPerRequest(beforePay, sampleCpu(processes), pay['2xx']);
      const result = {
        name,
        createPerSecond: servedPerSecond(create),
        createCpu,
        getPerSecond: servedPerSecond(get),
        getCpu,
        payPerSecond: servedPerSecond(pay),
        payCpu,
        bounded: await bounded(),
      };
      console.log(`${name}: create ${result.createPerSecond.toFixed(0)}/s, get ${result.getPerSecond.toFixed(0)}/s, pay ${result.payPerSecond.toFixed(0)}/s; ${JSON.stringify(result.bounded)}`);
      return result;
    };

    const empty = await phase('empty database', () => []);

    const [keyRow] = await db<{ key_id: number }[]>`select key_id from invoice.invoices limit 1`;
    if (!keyRow) throw new Error('the empty phase created no invoice');
    console.log(`loading ${STORED.toLocaleString('en')} invoices with COPY…`);
    const loadStarted = performance.now();
    const copy = await db.unsafe(
      `copy invoice.invoices (id, project_id, environment, project_name, order_id, order_description, price_amount, price_currency,
        price_amount_in_usd, pay_currency, pay_network, rate, rate_sources, rate_quoted_at, amount_expected, amount_received, status,
        address, key_id, address_index, success_url, cancel_url, is_donation, transaction_hash, created_at, expired_at, paid_at,
        confirmations_required, payment_tolerance_percent) from stdin`,
    ).writable();
    await pipeline(storedInvoiceRows(STORED, String(project.id), keyRow.key_id), copy);
    // The state a long-lived database is in: vacuumed and analysed, its dirty pages written. Without
    // this the second phase would share the CPU with autovacuum and the checkpointer catching up.
    await db`vacuum analyze invoice.invoices`;
    await db`checkpoint`;
    const loadSeconds = (performance.now() - loadStarted) / 1000;
    const [size] = await db<{ rows: string; bytes: string }[]>`
      select (select count(*) from invoice.invoices)::text as rows, pg_total_relation_size('invoice.invoices')::text as bytes`;
    console.log(`loaded in ${loadSeconds.toFixed(0)} s: ${size!.rows} rows, ${(Number(size!.bytes) / 2 ** 30).toFixed(1)} GiB with indexes`);
    const storedIds = (await db<{ id: string }[]>`
      select id from invoice.invoices tablesample system (1) where project_id = ${String(project.id)} and address_index >= ${STORED_INDEX_BASE} limit 100000`).map((r) => r.id);

    const full = await phase(`${STORED.toLocaleString('en')} invoices stored`, () => storedIds);

    const pct = (a: number, b: number) => `${((a / b) * 100).toFixed(0)} %`;
    const section = [
      '<!-- scale -->',
      '## Cost as data grows (`npm run bench:scale`)',
      '',
      `Written on ${new Date().toISOString()}. Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB RAM, Node ${process.version}; ` +
        `Postgres (shared_buffers as configured on this machine), NATS, the system and the load generator (autocannon, ${CONNECTIONS} connections, ${SECONDS} s per load) on this one machine.`,
      '',
      `${STORED.toLocaleString('en')} invoices written with COPY, vacuumed, analysed and checkpointed in ${loadSeconds.toFixed(0)} s (${(Number(size!.bytes) / 2 ** 30).toFixed(1)} GiB with indexes): a year of history over ${OTHER_PROJECTS.toLocaleString('en')} projects, a tenth the bench's own, the last ${OPEN.toLocaleString('en')} created within the hour and still open. Gets read random stored invoices of the bench's project (${storedIds.length.toLocaleString('en')} sampled); with the empty database, the invoices the create load made. Sandbox pay pays the invoices its phase's create load made, each once.`,
      '',
      '| phase | create req/s | get req/s | sandbox pay req/s | outbox rows after | idempotency keys | rate-limit counters (auth / payout) |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...[empty, full].map(
        (p) =>
          `| ${p.name} | ${p.createPerSecond.toFixed(0)} | ${p.getPerSecond.toFixed(0)} | ${p.payPerSecond.toFixed(0)} | ${p.bounded['invoice.outbox']} | ${p.bounded['invoice.idempotency_keys']} | ${p.bounded['auth.rate_limit_counters']} / ${p.bounded['payout.rate_limit_counters']} |`,
      ),
      '',
      `- create with ${STORED.toLocaleString('en')} stored: ${pct(full.createPerSecond, empty.createPerSecond)} of the empty database's req/s (target ≥ 90 %) ${full.createPerSecond >= 0.9 * empty.createPerSecond ? '✔' : '✘'}`,
      `- get with ${STORED.toLocaleString('en')} stored: ${pct(full.getPerSecond, empty.getPerSecond)} of the empty database's req/s (target ≥ 90 %) ${full.getPerSecond >= 0.9 * empty.getPerSecond ? '✔' : '✘'}`,
      `- sandbox pay with ${STORED.toLocaleString('en')} stored, ${OPEN.toLocaleString('en')} of them open: ${pct(full.payPerSecond, empty.payPerSecond)} of the empty database's req/s (target ≥ 90 %) ${full.payPerSecond >= 0.9 * empty.payPerSecond ? '✔' : '✘'}`,
      `- CPU per request, empty → stored: create ${empty.createCpu} → ${full.createCpu}; get ${empty.getCpu} → ${full.getCpu}; sandbox pay ${empty.payCpu} → ${full.payCpu}`,
      '<!-- /scale -->',
    ].join('\n');
    const current = existsSync(RESULTS_FILE) ? readFileSync(RESULTS_FILE, 'utf8') : '';
    const marked = /<!-- scale -->[\s\S]*<!-- \/scale -->/;
    writeFileSync(RESULTS_FILE, marked.test(current) ? current.replace(marked, section) : `${current.trimEnd()}\n\n${section}\n`);
    console.log(`\n${section}\n\nwritten to ${RESULTS_FILE}`);
  } finally {
    await db.end({ timeout: 5 });
    await system?.stop();
    await infra.dispose();
  }
}

runBenchmark('bench:scale', main);
