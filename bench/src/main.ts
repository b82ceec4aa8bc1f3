/**
 * `npm run bench`: the whole system on this machine, loaded through the gateway with autocannon,
 * next to a bare Fastify + Postgres INSERT baseline measured in the same run. Prints a table and
 * writes it, with the machine's description, to bench/results.md.
 *
 * BENCH_TARGET=http://host:port measures a running gateway instead of starting one (it signs up
 * its own merchant, reading the code from that system's mailbox folder, BENCH_MAILBOX_DIR, default
 * .data/mailbox, and makes a sandbox project there through the public API; its webhook receiver listens
 * on 127.0.0.1, so pay-to-webhook is measured only when the target runs on this machine in
 * development mode). BENCH_SECONDS and BENCH_CONNECTIONS change the load.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpus, freemem, totalmem } from 'node:os';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import postgres from 'postgres';
import { resolveNats, resolvePostgres, startSystem, type RunningSystem } from '@coinvoice/local';
import { startRateProviders } from './rate-providers';
import { cpuPerRequest, sampleCpu } from './cpu-accounting';
import { RESULTS_FILE } from './results-file';
import { signUp } from './sign-up';
import { statementSampler } from './pg-statements';
import { CONNECTIONS, load, SECONDS } from './load';

const WEBHOOK_SAMPLES = Number(process.env.BENCH_WEBHOOK_SAMPLES ?? 200);
/** Warm-up before the scenarios: never longer than a scenario itself. */
const WARM_UP_SECONDS = Math.min(2, SECONDS);

interface Row {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  note?: string;
  /** CPU per request of each process during the scenario (bench/src/cpu-accounting.ts). */
  cpu?: string;
}

/**
 * One API key is the whole load here: its per-key limit (6000/min by default, a protection of
 * the service) would turn the measurement into a count of 429s.
 */
const BENCH_LIMITS = { RATE_LIMIT_API_PER_KEY: '100000000/1m' };

const INVOICE_BODY = JSON.stringify({
  priceAmount: '19.90',
  priceCurrency: 'USD',
  payCurrency: 'BTC',
  successUrl: 'https://example.com/ok',
  cancelUrl: 'https://example.com/cancel',
  orderId: 'bench',
});

function rowOf(name: string, result: autocannon.Result, note?: string): Row {
  const errors = result.errors + result.timeouts + result.non2xx;
  // What the errors were: each non-2xx status with its count, then socket errors and timeouts.
  const statuses = Object.entries(result.statusCodeStats ?? {})
    .filter(([code]) => !code.startsWith('2'))
    .map(([code, stat]) => `${code} × ${stat.count}`);
  if (result.errors > 0) statuses.push(`socket errors × ${result.errors}`);
  if (result.timeouts > 0) statuses.push(`timeouts × ${result.timeouts}`);
  const why = statuses.length > 0 ? `errors: ${statuses.join(', ')}` : undefined;
  return { name, rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors, note: [note, why].filter(Boolean).join('; ') || undefined };
}

/** A scenario's load with the CPU each process spent per request (the system's pids and this process). */
async function measured(name: string, processes: Record<string, number>, options: autocannon.Options): Promise<{ row: Row; result: autocannon.Result }> {
  const before = sampleCpu(processes);
  const result = await load(options);
  return { row: { ...rowOf(name, result), cpu: cpuPerRequest(before, sampleCpu(processes), result.requests.total) }, result };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function json(url: string, init: RequestInit = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** What the bench's webhook receiver offers: when each invoice.paid arrived, and a wait for one. */
interface Receiver {
  url: string;
  arrivals: Map<string, number>;
  /** When the invoice's webhook arrived (performance.now()), once it has; undefined after `timeoutMs`. */
  arrival(invoiceId: string, timeoutMs: number): Promise<number | undefined>;
  close(): void;
}

/** A webhook receiver that records when each invoice.paid arrives. */
function startReceiver(): Promise<Receiver> {
  const arrivals = new Map<string, number>();
  // Waiting is an event, not a poll: a loop spinning in this process would take a core from the
  // system whose latency it measures (two cores here; the low-load p99 grew with it).
  const waiters = new Map<string, (at: number) => void>();
  const arrival = (invoiceId: string, timeoutMs: number) =>
    new Promise<number | undefined>((resolve) => {
      const known = arrivals.get(invoiceId);
      if (known !== undefined) return resolve(known);
      const timer = setTimeout(() => {
        waiters.delete(invoiceId);
        resolve(undefined);
      }, timeoutMs);
      waiters.set(invoiceId, (at) => {
        clearTimeout(timer);
        waiters.delete(invoiceId);
        resolve(at);
      });
    });
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const at = performance.now();
      try {
        const event = JSON.parse(body) as { invoiceId?: string };
        if (event.invoiceId && !arrivals.has(event.invoiceId)) {
          arrivals.set(event.invoiceId, at);
          waiters.get(event.invoiceId)?.(at);
        }
      } catch {
        /* not ours */
      }
      res.writeHead(204).end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      resolve({ url: `http://127.0.0.1:${port}/hook`, arrivals, arrival, close: () => server.close() });
    }),
  );
}

async function startBaseline(databaseUrl: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [path.join(__dirname, 'baseline.js')], { env: { ...process.env, DATABASE_URL: databaseUrl }, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening at (\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`baseline exited ${code}`)));
  });
  return { url, child };
}

/** Resident memory of each process of the system, in MB, from /proc (Linux). */
function residentSetSizes(system: RunningSystem): Record<string, number> {
  const sizes: Record<string, number> = {};
  for (const [name, info] of Object.entries(system.describe())) {
    try {
      const kib = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${info.pid}/status`, 'utf8'))?.[1];
      if (kib) sizes[name] = Number(kib) / 1024;
    } catch {
      /* not Linux, or the process is gone */
    }
  }
  return sizes;
}

function machine(): string {
  const cpu = cpus();
  return `${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM (${(freemem() / 2 ** 30).toFixed(0)} GiB free at start), Node ${process.version}, ${process.platform}`;
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-bench-'));
  // The systems the bench starts write their email (the sign-up codes) here, never to SMTP.
  const ownMailbox = { SMTP_URL: '', MAILBOX_DIR: path.join(dataDir, 'mailbox') };
  const pg = await resolvePostgres(process.env, dataDir);
  const nats = await resolveNats(process.env, dataDir);
  const dbName = `bench_${randomBytes(4).toString('hex')}`;
  const admin = postgres(pg.url, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`create database "${dbName}"`);
  const dbUrl = new URL(pg.url);
  dbUrl.pathname = `/${dbName}`;
  const databaseUrl = dbUrl.toString();
  let system: RunningSystem | undefined;
  let baseline: { url: string; child: ChildProcess } | undefined;
  const receiver = await startReceiver();
  try {
    console.log(`machine: ${machine()}`);
    const target = process.env.BENCH_TARGET?.replace(/\/+$/, '');
    if (!target) {
      console.log('starting the system…');
      system = await startSystem({
        databaseUrl,
        natsUrl: nats.url,
        logDir: path.join(dataDir, 'logs'),
        eventKeyDir: path.join(dataDir, 'event-keys'),
        gatewayPort: 0,
        env: { ...process.env, EVENT_NAMESPACE: `bench${randomBytes(3).toString('hex')}`, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', ...BENCH_LIMITS, ...ownMailbox },
      });
    } else {
      console.log(`measuring the running gateway at ${target}`);
    }
    const gw = target ?? system!.gatewayUrl;
    const email = `bench-${randomBytes(4).toString('hex')}@example.com`;
    // The sign-up code: from the system's mailbox folder, or for BENCH_TARGET that of the running
    // system (BENCH_MAILBOX_DIR; npm start's .data/mailbox by default).
    const mailboxDir = target ? path.resolve(process.env.BENCH_MAILBOX_DIR ?? path.join('.data', 'mailbox')) : ownMailbox.MAILBOX_DIR;
    const token = await signUp(gw, mailboxDir, { email, password: 'bench-password-1', name: 'Bench' });
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const project = await json(`${gw}/api/merchant/projects`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'Bench', environment: 'sandbox', webhookUrl: receiver.url }) });
    const key = await json(`${gw}/api/merchant/projects/${String(project.body.id)}/api-keys`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'bench' }) });
    const apiKey = String(key.body.key);
    const headers = { 'x-api-key': apiKey, 'content-type': 'application/json' };
    baseline = await startBaseline(databaseUrl);

    // Idle memory of every process, before any load (issue 11: < 120 MB each).
    await new Promise((r) => setTimeout(r, 2_000));
    const idleRss = system ? residentSetSizes(system) : {};

    const rows: Row[] = [];
    console.log(`load: ${CONNECTIONS} connections, ${SECONDS} s per scenario`);
    // Warm-up, so JIT and pools are hot for every scenario alike.
    await load({ url: `${baseline.url}/invoice`, method: 'POST', duration: WARM_UP_SECONDS });
    await load({ url: `${gw}/api/invoice`, method: 'POST', headers, body: INVOICE_BODY, duration: WARM_UP_SECONDS });

    const processes = {
      ...Object.fromEntries(Object.entries(system?.describe() ?? {}).map(([name, info]) => [name, info.pid])),
      'load generator': process.pid,
    };
    const baseCreate = (await measured('baseline: Fastify + 1 INSERT', { baseline: baseline.child.pid ?? 0, 'load generator': process.pid }, { url: `${baseline.url}/invoice`, method: 'POST' })).row;
    rows.push(baseCreate);
    const created: string[] = [];
    const { row: createRow } = await measured('create invoice (POST /api/invoice)', processes, {
      url: `${gw}/api/invoice`,
      method: 'POST',
      headers,
      body: INVOICE_BODY,
      setupClient(client) {
        client.on('body', (buf: Buffer) => {
          try {
            const id = (JSON.parse(buf.toString()) as { id?: string }).id;
            if (id) created.push(id);
          } catch {
            /* an error body */
          }
        });
      },
    });
    rows.push(createRow);

    let next = 0;
    const ids = created.slice();
    const { row: getRow } = await measured('get invoice (GET /api/invoice/{id})', processes, {
      requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: `/api/invoice/${ids[next++ % ids.length]}`, headers: { 'x-api-key': apiKey } }) }],
      url: gw,
    });
    rows.push(getRow);

    // Each pay needs its own Waiting invoice: pay the ones created above, each once.
    let payIndex = 0;
    // The pay phase's CPU leaves out the webhooks still queued when it ends: measured again once
    // every one has arrived, per paid invoice (the whole cost of a payment and its webhook).
    const statementsFile = process.env.BENCH_PG_STATEMENTS;
    const statements = statementsFile ? await statementSampler(admin) : undefined;
    await statements?.reset();
    const payStartCpu = sampleCpu(processes);
    const { row: payRow, result: pay } = await measured('sandbox pay (POST …/sandbox/pay)', processes, {
      url: gw,
      requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, path: `/api/invoice/${ids[payIndex++ % ids.length]}/sandbox/pay`, headers: { 'x-api-key': apiKey } }) }],
      amount: ids.length,
    });
    rows.push({ ...payRow, note: [payIndex > ids.length ? 'some ids paid twice (409s)' : undefined, payRow.note].filter(Boolean).join('; ') || undefined });

    // The pay phase queued one webhook per paid invoice; sample low-load latency only once they
    // have all arrived (else the samples queue behind the backlog), and report how long that took.
    const paidOk = pay['2xx'];
    if (statements && statementsFile) {
      await statements.write(statementsFile, `the pay phase: ${paidOk} invoices paid`);
      await statements.reset();
    }
    const drainStart = performance.now();
    const drainDeadline = Date.now() + 60_000;
    while (receiver.arrivals.size < paidOk && Date.now() < drainDeadline) await new Promise((r) => setTimeout(r, 50));
    const drainMs = performance.now() - drainStart;
    const payAndWebhooksCpu = cpuPerRequest(payStartCpu, sampleCpu(processes), paidOk);
    const backlogNote = `${receiver.arrivals.size} of ${paidOk} webhooks of the pay phase had arrived ${(drainMs / 1000).toFixed(1)} s after it ended`;
    console.log(backlogNote);
    if (statements && statementsFile) await statements.write(`${statementsFile}.drain`, `after the pay phase, until its webhooks had arrived: ${backlogNote}`);
    // Pay-to-webhook at low load: one pay at a time, timed from the pay request to the receiver.
    const latencies: number[] = [];
    for (let i = 0; i < WEBHOOK_SAMPLES; i++) {
      const inv = await json(`${gw}/api/invoice`, { method: 'POST', headers, body: INVOICE_BODY });
      const id = String(inv.body.id);
      const start = performance.now();
      await json(`${gw}/api/invoice/${id}/sandbox/pay`, { method: 'POST', headers: { 'x-api-key': apiKey } });
      const at = await receiver.arrival(id, 5000);
      if (at !== undefined) latencies.push(at - start);
    }
    latencies.sort((a, b) => a - b);
    const webhookP50 = percentile(latencies, 50);
    const webhookP99 = percentile(latencies, 99);

    // Invoice creation with live rates (docs/architecture.md#rates): rates are refreshed in the
    // background and read from a cache, so creation must cost the same (within 10%). Compared like
    // for like: two more systems started alike on the database as the phases above left it, each
    // with a live project of its own, loaded alike — static rates, then RATES_SOURCE=live against
    // local Coinbase and Kraken stand-ins. (Against the first system's create, measured on an
    // emptier database and before the pay phase's writes, the comparison failed on this alone.)
    // The two rows, in the order of rateSources below: static rates, then live.
    const twins: Row[] = [];
    if (!target) {
      await system!.stop();
      system = undefined;
      const providers = await startRateProviders();
      const rateSources: Array<[string, Record<string, string>]> = [
        ['create invoice, static rates, live project (for the comparison below)', {}],
        [
          'create invoice, live rates (RATES_SOURCE=live)',
          { RATES_SOURCE: 'live', RATES_COINBASE_URL: providers.coinbaseUrl, RATES_KRAKEN_URL: providers.krakenUrl, RATES_REFRESH_MS: '1000' },
        ],
      ];
      try {
        for (const [n, [name, rates]] of rateSources.entries()) {
          if (system) await system.stop();
          system = await startSystem({
            databaseUrl,
            natsUrl: nats.url,
            logDir: path.join(dataDir, `logs-rates-${n}`),
            eventKeyDir: path.join(dataDir, 'event-keys'),
            gatewayPort: 0,
            env: {
              ...process.env,
              EVENT_NAMESPACE: `bench${randomBytes(3).toString('hex')}`,
              LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
              ...BENCH_LIMITS,
              ...rates,
              ...ownMailbox,
            },
          });
          const lgw = system.gatewayUrl;
          // Live keys need a verified email: the sign-up code verified it.
          const ltoken = await signUp(lgw, ownMailbox.MAILBOX_DIR, { email: `live-${n}-${email}`, password: 'bench-password-1', name: 'Bench' });
          const lauth = { authorization: `Bearer ${ltoken}`, 'content-type': 'application/json' };
          const lproject = await json(`${lgw}/api/merchant/projects`, { method: 'POST', headers: lauth, body: JSON.stringify({ name: 'Bench rates', environment: 'live' }) });
          const lkey = await json(`${lgw}/api/merchant/projects/${String(lproject.body.id)}/api-keys`, { method: 'POST', headers: lauth, body: JSON.stringify({ name: 'bench' }) });
          const lheaders = { 'x-api-key': String(lkey.body.key), 'content-type': 'application/json' };
          const deadline = Date.now() + 30_000;
          while ((await json(`${lgw}/api/invoice`, { method: 'POST', headers: lheaders, body: INVOICE_BODY })).status !== 201) {
            if (Date.now() > deadline) throw new Error(`${name}: rates never became available`);
            await new Promise((r) => setTimeout(r, 200));
          }
          await load({ url: `${lgw}/api/invoice`, method: 'POST', headers: lheaders, body: INVOICE_BODY, duration: WARM_UP_SECONDS });
          twins.push(rowOf(name, await load({ url: `${lgw}/api/invoice`, method: 'POST', headers: lheaders, body: INVOICE_BODY })));
        }
        rows.push(...twins);
      } finally {
        providers.close();
      }
    }

    const [staticTwin, liveCreate] = twins;
    const pct = (a: number, b: number) => `${((a / b) * 100).toFixed(0)}%`;
    const table = [
      '| scenario | req/s | p50 ms | p99 ms | errors | vs baseline |',
      '| --- | ---: | ---: | ---: | ---: | ---: |',
      ...rows.map((r) => `| ${r.name} | ${r.rps.toFixed(0)} | ${r.p50} | ${r.p99} | ${r.errors} | ${r === baseCreate ? '100%' : pct(r.rps, baseCreate.rps)} |`),
      `| pay → webhook at receiver (${latencies.length} sequential, low load) | — | ${webhookP50.toFixed(1)} | ${webhookP99.toFixed(1)} | ${WEBHOOK_SAMPLES - latencies.length} lost | — |`,
    ].join('\n');
    const cpuLines = [
      ...rows.filter((r) => r.cpu).map((r) => `- ${r.name}: ${r.cpu}`),
      `- sandbox pay and its webhook, per paid invoice (the pay phase, then until every webhook had arrived): ${payAndWebhooksCpu}`,
    ];
    const noteLines = rows.filter((r) => r.note).map((r) => `- ${r.name}: ${r.note}`);
    const targets = [
      `create ≥ 35% of baseline: ${pct(rows[1]!.rps, baseCreate.rps)} ${rows[1]!.rps >= 0.35 * baseCreate.rps ? '✔' : '✘'}`,
      `get ≥ 50% of baseline: ${pct(rows[2]!.rps, baseCreate.rps)} ${rows[2]!.rps >= 0.5 * baseCreate.rps ? '✔' : '✘'}`,
      `sandbox pay ≥ 30% of baseline: ${pct(rows[3]!.rps, baseCreate.rps)} ${rows[3]!.rps >= 0.3 * baseCreate.rps ? '✔' : '✘'}`,
      `pay-to-webhook p99 < 50 ms: ${webhookP99.toFixed(1)} ms ${webhookP99 < 50 ? '✔' : '✘'}`,
      ...(Object.keys(idleRss).length > 0
        ? [
            `idle RSS < 120 MB per process: ${Object.entries(idleRss)
              .map(([name, mb]) => `${name} ${mb.toFixed(0)} MB`)
              .join(', ')} ${Object.values(idleRss).every((mb) => mb < 120) ? '✔' : '✘'}`,
          ]
        : []),
      ...(liveCreate && staticTwin
        ? [
            `create with live rates within 10% of static: ${pct(liveCreate.rps, staticTwin.rps)} of its req/s (p50 ${liveCreate.p50} vs ${staticTwin.p50} ms) ` +
              `${liveCreate.rps >= 0.9 * staticTwin.rps ? '✔' : '✘'}`,
          ]
        : []),
    ];
    console.log(`\n${table}\n${noteLines.length > 0 ? `\n${noteLines.join('\n')}\n` : ''}\n${targets.join('\n')}\n\nCPU per request (ms, by process):\n${cpuLines.join('\n')}`);

    const resultsFile = RESULTS_FILE;
    const previous = (() => {
      try {
        return readFileSync(resultsFile, 'utf8');
      } catch {
        return '';
      }
    })();
    const notes = /<!-- notes -->([\s\S]*)$/.exec(previous)?.[1] ?? '\n';
    writeFileSync(
      resultsFile,
      `# Benchmark results\n\nWritten by \`npm run bench\` on ${new Date().toISOString()}.\n\n` +
        `Machine: ${machine()}. Everything on this one machine: Postgres, NATS, the five processes, the ` +
        `load generator (autocannon, ${CONNECTIONS} connections, ${SECONDS} s per scenario) and the baseline process.\n\n` +
        `${table}\n\n${targets.map((t) => `- ${t}`).join('\n')}\n- ${backlogNote}\n\n` +
        `Where each request's CPU went, in ms per request by process (from /proc; Postgres is all its processes, ` +
        `the load generator is autocannon in the bench's own process; the pay phase also delivers its webhooks; ` +
        `"host busy" is the whole machine from /proc/stat, the kernel's network work included — well below 100 % ` +
        `means requests waited on each other, not on the CPU):\n\n${cpuLines.join('\n')}\n\n<!-- notes -->${notes}`,
    );
    console.log(`\nwritten to ${resultsFile}`);
  } finally {
    receiver.close();
    baseline?.child.kill('SIGTERM');
    await system?.stop();
    await admin.unsafe(`drop database if exists "${dbName}" with (force)`).catch(() => undefined);
    await admin.end();
    await nats.stop();
    await pg.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
    process.exit(1);
  },
);
