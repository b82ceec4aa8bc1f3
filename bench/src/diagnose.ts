/**
 * `node bench/dist/diagnose.js`: where a gateway request's time goes, hop by hop, on this machine:
 * the gateway alone (/healthz), the invoice gRPC hop alone (GetInvoice from here), and the whole
 * GET /api/invoice/{id}. Prints requests per second for each at the bench's concurrency; then, for
 * create, get and sandbox pay, the CPU each process spent per request (bench/src/cpu-accounting.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import postgres from 'postgres';
import { createRpcClient } from '@coinvoice/runtime';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { resolveNats, resolvePostgres, startSystem } from '@coinvoice/local';
import { cpuPerRequest, sampleCpu } from './cpu-accounting';
import { signUp } from './sign-up';

const CONNECTIONS = 32;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

async function rate(label: string, options: autocannon.Options, processes?: Record<string, number>): Promise<void> {
  const before = processes && sampleCpu(processes);
  const result = await new Promise<autocannon.Result>((resolve, reject) =>
    // A fixed number of requests (`amount`) replaces the duration.
    autocannon({ connections: CONNECTIONS, ...(options.amount === undefined ? { duration: SECONDS } : {}), ...options }, (err, res) => (err ? reject(err) : resolve(res))),
  );
  console.log(`${label}: ${result.requests.average.toFixed(0)} req/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, errors ${result.errors + result.non2xx}`);
  if (processes && before) console.log(`  CPU: ${cpuPerRequest(before, sampleCpu(processes), result.requests.total)}`);
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-diag-'));
  const mailboxDir = path.join(dataDir, 'mailbox'); // the sign-up code arrives here
  const pg = await resolvePostgres(process.env, dataDir);
  const nats = await resolveNats(process.env, dataDir);
  const dbName = `diag_${randomBytes(4).toString('hex')}`;
  const admin = postgres(pg.url, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`create database "${dbName}"`);
  const url = new URL(pg.url);
  url.pathname = `/${dbName}`;
  const system = await startSystem({
    databaseUrl: url.toString(),
    natsUrl: nats.url,
    logDir: path.join(dataDir, 'logs'),
    eventKeyDir: path.join(dataDir, 'event-keys'),
    gatewayPort: 0,
    env: { ...process.env, EVENT_NAMESPACE: `diag${randomBytes(3).toString('hex')}`, LOG_LEVEL: 'warn', RATE_LIMIT_API_PER_KEY: '100000000/1m', SMTP_URL: '', MAILBOX_DIR: mailboxDir },
  });
  try {
    const gw = system.gatewayUrl;
    const post = async (p: string, body: unknown, headers: Record<string, string> = {}) =>
      (await fetch(`${gw}${p}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })).json() as Promise<Record<string, string>>;
    const token = await signUp(gw, mailboxDir, { email: `d-${randomBytes(4).toString('hex')}@example.com`, password: 'diagnose-pw-1', name: 'D' });
    const auth = { authorization: `Bearer ${token}` };
    const project = await post('/api/merchant/projects', { name: 'D', environment: 'sandbox' }, auth);
    const key = await post(`/api/merchant/projects/${project.id}/api-keys`, { name: 'd' }, auth);
    const invoice = await post('/api/invoice', { priceAmount: '1.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://e.x/', cancelUrl: 'https://e.x/' }, { 'x-api-key': key.key! });

    // DIAGNOSE_CPU_ONLY=1 skips the hop-by-hop part (for a CPU profile of create/get/pay alone).
    if (process.env.DIAGNOSE_CPU_ONLY !== '1') {
      await rate('gateway alone (GET /healthz)', { url: `${gw}/healthz` });
      await rate('gateway + key check, no backend (GET /api/invoice/not-a-uuid → 400)', { url: `${gw}/api/invoice/x`, headers: { 'x-api-key': key.key! } });
      const invoiceUrl = system.describe().invoice!.grpcUrl!;
      const client = createRpcClient(InvoiceService, invoiceUrl);
      let done = 0;
      const until = Date.now() + SECONDS * 1000;
      const started = Date.now();
      await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
        while (Date.now() < until) {
          await client.getInvoice({ projectId: project.id!, invoiceId: invoice.id! });
          done++;
        }
      }));
      console.log(`invoice gRPC GetInvoice alone (from this process): ${(done / ((Date.now() - started) / 1000)).toFixed(0)} req/s`);
      await rate('whole GET /api/invoice/{id}', { url: `${gw}/api/invoice/${invoice.id}`, headers: { 'x-api-key': key.key! } });
    }

    // Where each request's CPU goes, per process (load generator = this process).
    const processes = { ...Object.fromEntries(Object.entries(system.describe()).map(([name, info]) => [name, info.pid])), 'load generator': process.pid };
    const created: string[] = [];
    const headers = { 'x-api-key': key.key!, 'content-type': 'application/json' };
    const body = JSON.stringify({ priceAmount: '19.90', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://e.x/', cancelUrl: 'https://e.x/' });
    await rate('create (POST /api/invoice)', {
      url: `${gw}/api/invoice`, method: 'POST', headers, body,
      setupClient(c) {
        c.on('body', (buf: Buffer) => {
          const id = (JSON.parse(buf.toString()) as { id?: string }).id;
          if (id) created.push(id);
        });
      },
    }, processes);
    // DIAGNOSE_CREATE_ONLY=1 stops after create (a CPU profile of creation alone).
    if (process.env.DIAGNOSE_CREATE_ONLY === '1') return;
    let next = 0;
    await rate('get (GET /api/invoice/{id})', { url: gw, requests: [{ method: 'GET', setupRequest: (r) => ({ ...r, path: `/api/invoice/${created[next++ % created.length]}`, headers: { 'x-api-key': key.key! } }) }] }, processes);
    let paying = 0;
    await rate('sandbox pay (POST …/sandbox/pay, no webhook URL)', { url: gw, amount: created.length, requests: [{ method: 'POST', setupRequest: (r) => ({ ...r, path: `/api/invoice/${created[paying++ % created.length]}/sandbox/pay`, headers: { 'x-api-key': key.key! } }) }] }, processes);
  } finally {
    await system.stop();
    await admin.unsafe(`drop database if exists "${dbName}" with (force)`).catch(() => undefined);
    await admin.end();
    await nats.stop();
    await pg.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  console.error(err);
  process.exit(1);
});
