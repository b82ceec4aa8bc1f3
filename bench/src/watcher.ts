/**
 * `npm run bench:watcher`: the Ethereum watcher against a real node (anvil), the whole system
 * started as `npm start` starts it. Measures
 *   1. backfill: blocks per second while the watcher catches up 1,000 anvil blocks with N open
 *      live invoices watched (100 of them paid inside those blocks), for each N of
 *      BENCH_WATCHER_INVOICES (e.g. `1000,20000,100000`), and the watcher's peak RSS; a block's
 *      cost must not grow with N (docs/watcher.md). The invoices paid are created through the
 *      API; the rest of each N are copies with addresses of their own, loaded in one statement
 *      (creating 100,000 through the API would measure the API, not the watcher). And
 *   2. latency from the block that gives a payment its last required confirmation to the
 *      invoice.paid webhook at a receiver (sequential payments, CHAIN_ETHEREUM_POLL_MS as set).
 * First, on a second anvil started as base, the 2-second-block scenario (fast-chain.ts): blocks/s
 * with 1,000 open invoices, and whether the watcher keeps up at 10× the chain's block rate.
 * Writes its section of bench/results.md (between the watcher markers).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { cpus, freemem, tmpdir, totalmem } from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { createPublicClient, createTestClient, createWalletClient, http as viemHttp, parseEther } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { foundry } from 'viem/chains';
import { evmWatcherConfig } from '@coinvoice/chains/evm/family';
import { chainWatcherSettings } from '@coinvoice/chains/watchers';
import { freePort, resolveNats, resolvePostgres, startSystem } from '@coinvoice/local';
import { loadConfig } from '@coinvoice/runtime';
import { FAST_BLOCKS, FAST_CHAIN, FAST_INVOICES, FAST_LIVE_BLOCKS, fastChainSection, runFastChain, startFastChainNode, untilNodeAnswers, type FastChainNode } from './fast-chain';
import { RESULTS_FILE } from './results-file';
import { signUp } from './sign-up';

const INVOICE_COUNTS = (process.env.BENCH_WATCHER_INVOICES ?? '1000').split(',').map((n) => Number(n.trim()));
if (INVOICE_COUNTS.some((n) => !Number.isSafeInteger(n) || n < 1)) throw new Error(`BENCH_WATCHER_INVOICES=${process.env.BENCH_WATCHER_INVOICES}: expected counts like 1000,20000`);
const BLOCKS = Number(process.env.BENCH_WATCHER_BLOCKS ?? 1000);
const PAID_IN_BACKFILL = Number(process.env.BENCH_WATCHER_PAID ?? 100);
const LATENCY_SAMPLES = Number(process.env.BENCH_WATCHER_SAMPLES ?? 20);
const CONFIRMATIONS = 3;
const POLL_MS = Number(process.env.BENCH_WATCHER_POLL_MS ?? 500);
/** The watcher's WATCHER_FULL_RELOAD: each round waits one full read of the watched set (its loaded invoices are older than the incremental read reaches). */
const FULL_RELOAD_MS = Number(process.env.BENCH_WATCHER_FULL_RELOAD_MS ?? 60_000);
const FUNDED_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80' as const;

async function json(url: string, init: RequestInit = {}): Promise<Record<string, unknown>> {
  const res = await fetch(url, init);
  const body = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${init.method ?? 'GET'} ${url}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-bench-watcher-'));
  const mailboxDir = path.join(dataDir, 'mailbox'); // the sign-up code arrives here
  const pg = await resolvePostgres(process.env, dataDir);
  const nats = await resolveNats(process.env, dataDir);
  const dbName = `benchw_${randomBytes(4).toString('hex')}`;
  const admin = postgres(pg.url, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`create database "${dbName}"`);
  const dbUrl = new URL(pg.url);
  dbUrl.pathname = `/${dbName}`;

  const anvilPort = await freePort();
  const anvilBin = path.join(path.dirname(require.resolve('@foundry-rs/anvil-linux-amd64/package.json')), 'bin', 'anvil');
  const anvil = spawn(anvilBin, ['--port', String(anvilPort), '--host', '127.0.0.1', '--silent'], { stdio: 'ignore' });
  const rpcUrl = `http://127.0.0.1:${anvilPort}`;
  const transport = viemHttp(rpcUrl, { retryCount: 3 });
  const account = privateKeyToAccount(FUNDED_KEY);
  const publicClient = createPublicClient({ chain: foundry, transport });
  const wallet = createWalletClient({ chain: foundry, transport, account });
  const testClient = createTestClient({ chain: foundry, mode: 'anvil', transport });
  await untilNodeAnswers(publicClient);

  const fastNode: FastChainNode = await startFastChainNode(anvilBin);

  const arrivals = new Map<string, number>();
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { invoiceId?: string; status?: string };
      if (body.status === 'Paid' && body.invoiceId && !arrivals.has(body.invoiceId)) arrivals.set(body.invoiceId, performance.now());
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;

  let system: Awaited<ReturnType<typeof startSystem>> | undefined;
  let db: ReturnType<typeof postgres> | undefined;
  try {
    system = await startSystem({
      databaseUrl: dbUrl.toString(),
      natsUrl: nats.url,
      logDir: path.join(dataDir, 'logs'),
      eventKeyDir: path.join(dataDir, 'event-keys'),
      gatewayPort: 0,
      env: {
        ...process.env,
        EVENT_NAMESPACE: `benchw${randomBytes(3).toString('hex')}`,
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
        CHAIN_ETHEREUM_RPC_URL: rpcUrl,
        // anvil's own chain id: the watcher checks the node's eth_chainId against it at start.
        CHAIN_ETHEREUM_CHAIN_ID: '31337',
        CHAIN_ETHEREUM_CONFIRMATIONS: String(CONFIRMATIONS),
        ...fastNode.env,
        CHAIN_ETHEREUM_POLL_MS: String(POLL_MS),
        WATCHER_FULL_RELOAD: String(FULL_RELOAD_MS),
        // Email (the sign-up code) goes to a mailbox folder of this run's own.
        SMTP_URL: '',
        MAILBOX_DIR: mailboxDir,
      },
    });
    db = postgres(dbUrl.toString(), { max: 2, onnotice: () => undefined, connection: { search_path: 'invoice' } });
    const sqlDb = db;
    const gw = system.gatewayUrl;
    const email = `bw-${randomBytes(4).toString('hex')}@example.com`;
    // Live keys need a verified email (403 email_not_verified otherwise): the sign-up code,
    // read from the system's mailbox folder, verified it.
    const token = await signUp(gw, mailboxDir, { email, password: 'bench-password-1', name: 'Bench' });
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const project = await json(`${gw}/api/merchant/projects`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'Bench live', environment: 'live', webhookUrl: receiverUrl }) });
    const key = await json(`${gw}/api/merchant/projects/${String(project.id)}/api-keys`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'bench' }) });
    const headers = { 'x-api-key': String(key.key), 'content-type': 'application/json' };
    const createInvoice = async (payNetwork = 'ethereum') =>
      (await json(`${gw}/api/invoice`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'ETH', payNetwork, successUrl: 'https://b.example/ok', cancelUrl: 'https://b.example/no' }),
      })) as { id: string; address: `0x${string}`; amountExpected: number };

    const createMany = async (count: number, payNetwork = 'ethereum') => {
      const made: Array<{ id: string; address: `0x${string}`; amountExpected: number }> = [];
      for (let i = 0; i < count; i += 20) made.push(...(await Promise.all(Array.from({ length: Math.min(20, count - i) }, () => createInvoice(payNetwork)))));
      return made;
    };
    /**
     * Open live ETH invoices up to `total`: copies of `template` with random addresses, created
     * over the past hour as a steady stream of checkouts would have made them, in one statement.
     */
    const fillOpenInvoices = async (total: number, template: string) => {
      const open = Number((await sqlDb<{ n: string }[]>`select count(*) as n from invoices where environment = 'live' and status = 'Waiting'`)[0]!.n);
      const missing = total - open;
      if (missing <= 0) return;
      const addresses = Array.from({ length: missing }, () => `0x${randomBytes(20).toString('hex')}`);
      const columns = (
        await sqlDb<{ column_name: string }[]>`
          select column_name from information_schema.columns where table_schema = 'invoice' and table_name = 'invoices' order by ordinal_position`
      ).map((c) => c.column_name);
      const values = columns.map((c) =>
        c === 'id' ? 'gen_random_uuid()' : c === 'address' ? 'a.address' : c === 'address_index' ? '(1500000000 + (select count(*) from invoices) + a.n)::int' : c === 'created_at' ? "now() - make_interval(secs => a.n % 3600)" : `i.${c}`,
      );
      for (let i = 0; i < addresses.length; i += 50_000) {
        await sqlDb.unsafe(
          `insert into invoices (${columns.join(', ')}) select ${values.join(', ')} from invoices i, unnest($1::text[]) with ordinality as a(address, n) where i.id = $2`,
          [addresses.slice(i, i + 50_000), template],
        );
      }
    };
    const peakRssMb = (pid: number) => Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

    // 0. The 2-second-block network (fast-chain.ts), first: its open invoices are then the only
    // ones, and closed before the Ethereum rounds count theirs.
    const fastWatcher = () => {
      const info = system?.describe()[`watch-${FAST_CHAIN}`];
      if (!info) throw new Error(`no watch-${FAST_CHAIN} process`);
      return info.pid;
    };
    const fastPayable = await createMany(Math.min(FAST_INVOICES, Math.ceil((FAST_BLOCKS + FAST_LIVE_BLOCKS + 1) / 10)), FAST_CHAIN);
    const fastPollMs = evmWatcherConfig(loadConfig(chainWatcherSettings, { ...process.env, ...fastNode.env }), FAST_CHAIN).pollMs;
    console.log(`${FAST_CHAIN}: ${FAST_INVOICES} open live invoices, blocks 2 s apart…`);
    const fast = await runFastChain({ node: fastNode, sql: sqlDb, watcherPid: fastWatcher, pollMs: fastPollMs, payable: fastPayable });

    // 1. Backfill, once per count of open invoices: the watcher is paused (SIGSTOP) while BLOCKS
    // blocks are produced, then resumed.
    const watcher = system.describe()['watch-ethereum'];
    if (!watcher) throw new Error('no watcher process');
    const cursor = async () => Number((await sqlDb<{ height: string }[]>`select height from chain_cursors where chain = 'ethereum'`)[0]?.height ?? -1);
    const paidCount = async () => Number((await sqlDb<{ n: string }[]>`select count(*) as n from invoices where status = 'Paid'`)[0]?.n ?? 0);
    let nonce = await publicClient.getTransactionCount({ address: account.address });
    const rounds: Array<{ open: number; blocks: number; blocksPerSecond: number; backfillMs: number; peakRssMb: number }> = [];
    for (const openInvoices of INVOICE_COUNTS) {
      console.log(`round: ${openInvoices} open live ETH invoices (${PAID_IN_BACKFILL} through the API)…`);
      const paidHere = await createMany(PAID_IN_BACKFILL);
      await fillOpenInvoices(openInvoices, paidHere[0]!.id);
      while ((await cursor()) < Number(await publicClient.getBlockNumber({ cacheTime: 0 }))) await new Promise((r) => setTimeout(r, 100));
      // The loaded copies are older than the watcher's incremental read reaches back: its next
      // full read of the set (every WATCHER_FULL_RELOAD) takes them in.
      await new Promise((r) => setTimeout(r, FULL_RELOAD_MS + 2_000));
      process.kill(watcher.pid, 'SIGSTOP');
      const start = Number(await publicClient.getBlockNumber({ cacheTime: 0 }));
      const gap = Math.floor(BLOCKS / PAID_IN_BACKFILL);
      const paidBefore = await paidCount();
      for (let i = 0; i < PAID_IN_BACKFILL; i++) {
        const invoice = paidHere[i]!;
        await wallet.sendTransaction({ to: invoice.address, value: parseEther(String(invoice.amountExpected)), nonce: nonce++ });
        await testClient.mine({ blocks: gap - 1 });
      }
      const head = Number(await publicClient.getBlockNumber({ cacheTime: 0 }));
      const blocks = head - start;
      const t0 = performance.now();
      process.kill(watcher.pid, 'SIGCONT');
      while ((await cursor()) < head) await new Promise((r) => setTimeout(r, 20));
      const backfillMs = performance.now() - t0;
      while ((await paidCount()) < paidBefore + PAID_IN_BACKFILL) await new Promise((r) => setTimeout(r, 50));
      const round = { open: openInvoices, blocks, blocksPerSecond: blocks / (backfillMs / 1000), backfillMs, peakRssMb: peakRssMb(watcher.pid) };
      rounds.push(round);
      console.log(`backfill: ${blocks} blocks with ${openInvoices} open invoices: ${round.blocksPerSecond.toFixed(0)} blocks/s (${(backfillMs / 1000).toFixed(2)} s), watcher peak RSS ${round.peakRssMb.toFixed(0)} MB`);
    }

    // 2. Latency: last confirmation block mined → invoice.paid at the receiver.
    const latencyInvoices = await createMany(LATENCY_SAMPLES);
    const latencies: number[] = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      const invoice = latencyInvoices[i]!;
      const hash = await wallet.sendTransaction({ to: invoice.address, value: parseEther(String(invoice.amountExpected)), nonce: nonce++ });
      await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 });
      if (CONFIRMATIONS > 2) await testClient.mine({ blocks: CONFIRMATIONS - 2 });
      await new Promise((r) => setTimeout(r, 300));
      await testClient.mine({ blocks: 1 }); // the last required confirmation
      const confirmedAt = performance.now();
      while (!arrivals.has(invoice.id)) await new Promise((r) => setTimeout(r, 5));
      latencies.push(arrivals.get(invoice.id)! - confirmedAt);
    }
    latencies.sort((a, b) => a - b);
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    console.log(`last confirmation → invoice.paid webhook: p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, max ${latencies[latencies.length - 1]!.toFixed(0)} ms (poll ${POLL_MS} ms)`);

    const section = [
      '<!-- watcher -->',
      '## Ethereum watcher (`npm run bench:watcher`)',
      '',
      `Written on ${new Date().toISOString()}. Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB RAM (${Math.round(freemem() / 2 ** 30)} GiB free), Node ${process.version}; anvil, Postgres, NATS and the system's processes on this one machine.`,
      ...(process.env.BENCH_MACHINE_NOTE ? [`**${process.env.BENCH_MACHINE_NOTE}**`] : []),
      '',
      '| measurement | result |',
      '| --- | ---: |',
      ...rounds.map(
        (r) =>
          `| backfill: ${r.blocks} anvil blocks, ${r.open.toLocaleString('en')} open live invoices watched, ${PAID_IN_BACKFILL} paid inside them (batches of 50 blocks per transaction); watcher peak RSS | ${r.blocksPerSecond.toFixed(0)} blocks/s (${(r.backfillMs / 1000).toFixed(2)} s); ${r.peakRssMb.toFixed(0)} MB |`,
      ),
      `| last required confirmation mined → invoice.paid at the receiver, p50 (${LATENCY_SAMPLES} sequential payments, ${CONFIRMATIONS} confirmations, CHAIN_ETHEREUM_POLL_MS=${POLL_MS}) | ${p50.toFixed(0)} ms |`,
      `| same, p99 / max | ${p99.toFixed(0)} ms / ${latencies[latencies.length - 1]!.toFixed(0)} ms |`,
      '',
      `Target: latency < 1 s plus the poll interval (${POLL_MS} ms): ${p99 < 1000 + POLL_MS ? '✔' : '✘'} at p99.`,
      ...(rounds.length > 1
        ? [
            '',
            `Flat cost (docs/watcher.md): with ${rounds[rounds.length - 1]!.open.toLocaleString('en')} open invoices the watcher keeps ${((100 * rounds[rounds.length - 1]!.blocksPerSecond) / rounds[0]!.blocksPerSecond).toFixed(0)} % of its blocks/s with ${rounds[0]!.open.toLocaleString('en')} (target ≥ 80 %), peak RSS ${rounds[rounds.length - 1]!.peakRssMb.toFixed(0)} MB (target < 300 MB).`,
          ]
        : []),
      '<!-- /watcher -->',
    ].join('\n');
    const file = RESULTS_FILE;
    const current = existsSync(file) ? readFileSync(file, 'utf8') : '';
    const marked = /<!-- watcher -->[\s\S]*<!-- \/watcher -->/;
    let updated = marked.test(current) ? current.replace(marked, section) : `${current.trimEnd()}\n\n${section}\n`;
    // The 2-second-block network has a section of its own, right after the Ethereum one.
    const fastSection = ['<!-- watcher-fast-chain -->', ...fastChainSection(fast), '<!-- /watcher-fast-chain -->'].join('\n');
    const fastMarked = /<!-- watcher-fast-chain -->[\s\S]*<!-- \/watcher-fast-chain -->/;
    updated = fastMarked.test(updated) ? updated.replace(fastMarked, fastSection) : updated.replace('<!-- /watcher -->', `<!-- /watcher -->\n\n${fastSection}`);
    writeFileSync(file, updated);
    console.log(`wrote ${file}`);
  } finally {
    await db?.end({ timeout: 5 });
    await system?.stop();
    receiver.close();
    anvil.kill('SIGTERM');
    fastNode.stop();
    await admin.unsafe(`drop database if exists "${dbName}" with (force)`).catch(() => undefined);
    await admin.end({ timeout: 5 });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
