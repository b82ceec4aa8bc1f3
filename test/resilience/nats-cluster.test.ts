/**
 * Issue 11, Done when 4: the system on a 3-node JetStream cluster with R3 streams
 * (NATS_STREAM_REPLICAS=3) loses nothing and credits nothing twice when a node dies under load.
 * 8 clients create and pay sandbox invoices through the gateway (retrying what did not get an
 * answer); a few seconds in, the node leading the invoice stream is SIGKILLed and stays dead.
 * Then: every invoice is Paid, the webhook receiver got exactly one invoice.paid per invoice,
 * the payout ledger has exactly one credit per invoice, of the invoice's amount, and the balance
 * is their sum.
 */
import { randomUUID } from 'node:crypto';
import { ensureStream } from '@coinvoice/runtime';
import { nanos, type JetStreamManager, type NatsConnection, type StreamInfo } from 'nats';
import postgres from 'postgres';
import { apiKeyHeader, createProjectWithKey, GatewayClient, registerMerchant, type ProjectFixture } from '../support/http';
import { NatsCluster } from '../support/nats-cluster';
import { bootSystem, type BootedSystem } from '../support/system';
import { Receiver } from '../e2e/webhooks.support';

const CLIENTS = 8;
const LOAD_BEFORE_KILL_MS = 4_000;
const LOAD_AFTER_KILL_MS = 8_000;

let cluster: NatsCluster;
let system: BootedSystem;
let receiver: Receiver;
let nc: NatsConnection;
let api: GatewayClient;

beforeAll(async () => {
  receiver = await new Receiver().start();
  cluster = await NatsCluster.start(3);
  nc = await cluster.connect();
  system = await bootSystem({
    env: { NATS_URL: cluster.url, NATS_STREAM_REPLICAS: '3', PASSWORD_HASH_MEMORY_KIB: '1024' },
    timeoutMs: 90_000,
  });
  api = new GatewayClient(system.gatewayUrl);
}, 150_000);

afterAll(async () => {
  await system?.stop();
  await nc?.close().catch(() => undefined);
  await cluster?.destroy();
  await receiver?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A request that may meet a failing node: retried on a network error or a 5xx, up to a deadline. */
async function withRetries(what: string, attempt: () => Promise<{ status: number; text: string; body: any }>, accept: (status: number) => boolean) {
  const deadline = Date.now() + 30_000;
  for (let tries = 1; ; tries++) {
    try {
      const res = await attempt();
      if (accept(res.status)) return res;
      if (res.status < 500 || Date.now() > deadline) throw new Error(`${what}: ${res.status} ${res.text}`);
    } catch (err) {
      if (!(err instanceof TypeError) || Date.now() > deadline) throw err; // TypeError: fetch's network failure
    }
    await sleep(Math.min(50 * tries, 500));
  }
}

/** Stream info, asked again while the JetStream API times out (a node has just died), up to `withinMs`. */
async function streamInfoOnceAnswered(jsm: JetStreamManager, stream: string, withinMs: number): Promise<StreamInfo> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      const info = await jsm.streams.info(stream);
      if (info.cluster?.leader || Date.now() > deadline) return info;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await sleep(250);
  }
}

/** One client: create (with an Idempotency-Key, so a retry is safe), then pay, until `until`. */
async function client(project: ProjectFixture, until: () => boolean, created: string[]): Promise<void> {
  while (!until()) {
    const key = randomUUID();
    const invoice = await withRetries(
      'create',
      () =>
        api.post(
          '/api/invoice',
          { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
          { headers: { ...apiKeyHeader(project.key), 'idempotency-key': key } },
        ),
      (status) => status === 201 || status === 200,
    );
    const id = String(invoice.body.id);
    created.push(id);
    // A retried pay whose first try went through answers 409 invoice_not_payable: then it is Paid.
    const paid = await withRetries('pay', () => api.post(`/api/invoice/${id}/sandbox/pay`, {}, { headers: apiKeyHeader(project.key) }), (s) => s === 200 || s === 409);
    if (paid.status === 409) {
      const now = await api.get(`/api/invoice/${id}`, { headers: apiKeyHeader(project.key) });
      if (now.body.status !== 'Paid') throw new Error(`pay answered 409 for an invoice that is ${now.body.status}: ${paid.text}`);
    }
  }
}

test('a stream made on one replica (NATS_STREAM_REPLICAS=1) becomes R3 when the setting says 3, keeping its events', async () => {
  const jsm = await nc.jetstreamManager();
  const namespace = `r1r3_${randomUUID().slice(0, 8)}`;
  const r1 = await ensureStream(jsm, { namespace, service: 'invoice', replicas: 1 });
  expect(r1.config.num_replicas).toBe(1);
  const js = nc.jetstream();
  for (let i = 0; i < 5; i++) await js.publish(`${namespace}.invoice.created`, new TextEncoder().encode(String(i)), { msgID: `m${i}` });
  const r3 = await ensureStream(jsm, { namespace, service: 'invoice', replicas: 3 });
  expect(r3.config.num_replicas).toBe(3);
  // A leader and two copies that caught up with it (while it scales, the group may have no leader).
  const settled = (i: StreamInfo) => Boolean(i.cluster?.leader) && (i.cluster?.replicas ?? []).filter((r) => r.current).length === 2;
  const deadline = Date.now() + 20_000;
  let info = await jsm.streams.info(r3.config.name);
  while (!settled(info) && Date.now() < deadline) {
    await sleep(200);
    info = await jsm.streams.info(r3.config.name);
  }
  expect(info.cluster?.leader).toEqual(expect.any(String));
  expect(info.cluster?.replicas?.map((r) => r.current)).toEqual([true, true]);
  expect(info.state.messages).toBe(5);
  await jsm.streams.delete(r3.config.name);
}, 60_000);

test('a node killed under load: every invoice Paid, one webhook each, one ledger credit each', async () => {
  const jsm = await nc.jetstreamManager();
  const invoiceStream = `${system.namespace}_INVOICE`.toUpperCase();
  const before = await jsm.streams.info(invoiceStream);
  expect(before.config.num_replicas).toBe(3);
  expect(before.config.max_age).toBe(nanos(30 * 86_400_000));
  expect(before.cluster?.replicas).toHaveLength(2);
  for (const service of ['AUTH', 'PAYOUT', 'NOTIFIER']) {
    expect((await jsm.streams.info(`${system.namespace.toUpperCase()}_${service}`)).config.num_replicas).toBe(3);
  }

  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: receiver.url });

  const created: string[] = [];
  let stop = false;
  const clients = Array.from({ length: CLIENTS }, () => client(project, () => stop, created));
  await sleep(LOAD_BEFORE_KILL_MS);
  const leader = (await jsm.streams.info(invoiceStream)).cluster?.leader;
  if (!leader) throw new Error('the invoice stream has no leader');
  const createdAtKill = created.length;
  await cluster.kill(leader);
  await sleep(LOAD_AFTER_KILL_MS);
  stop = true;
  await Promise.all(clients);
  const createdAfterKill = created.length - createdAtKill;
  expect(createdAtKill).toBeGreaterThan(0);
  expect(createdAfterKill).toBeGreaterThan(0);

  // The stream lives on, led by another node. The test's own connection may have been on the
  // killed node, and the cluster's meta leader may have died with it: the JetStream API answers
  // again once the client has reconnected and a new meta leader is elected, so ask until then.
  const after = await streamInfoOnceAnswered(jsm, invoiceStream, 30_000);
  expect(after.cluster?.leader).toBeDefined();
  expect(after.cluster?.leader).not.toBe(leader);

  // One invoice.paid webhook per invoice, and no more (a late duplicate would arrive now).
  await receiver.waitFor(created.length, 90_000);
  await sleep(2_000);
  const deliveredFor = receiver.requests.map((r) => (JSON.parse(r.body) as { invoiceId: string }).invoiceId);
  expect(deliveredFor).toHaveLength(created.length);
  expect(new Set(deliveredFor)).toEqual(new Set(created));
  expect(new Set(receiver.requests.map((r) => String(r.headers['webhook-id']))).size).toBe(created.length);

  const sql = postgres(system.database.url, { max: 1, onnotice: () => undefined });
  try {
    const notPaid = await sql`select id, status from invoice.invoices where project_id = ${project.id} and status <> 'Paid'`;
    expect(notPaid).toEqual([]);
    const invoices = await sql`select count(*)::int as n from invoice.invoices where project_id = ${project.id}`;
    expect(invoices[0]?.n).toBe(created.length);
    // The ledger consumer may trail the webhooks: wait for it, then check every credit.
    const deadline = Date.now() + 30_000;
    let credits: Array<{ invoice_id: string; credits: number; same_amount: boolean }> = [];
    for (;;) {
      credits = await sql`
        select i.id as invoice_id, count(l.id)::int as credits, coalesce(sum(l.amount), 0) = i.amount_received as same_amount
        from invoice.invoices i
        left join payout.ledger_entries l on l.invoice_id = i.id and l.kind = 'credit_invoice'
        where i.project_id = ${project.id}
        group by i.id, i.amount_received`;
      if (credits.every((c) => c.credits >= 1) || Date.now() > deadline) break;
      await sleep(250);
    }
    expect(credits.filter((c) => c.credits !== 1)).toEqual([]);
    expect(credits.filter((c) => !c.same_amount)).toEqual([]);
    const [balance] = await sql`
      select b.available::text as available,
             b.available = (select sum(amount) from payout.ledger_entries where project_id = ${project.id} and kind = 'credit_invoice') as is_sum_of_credits,
             b.available = (select sum(amount_received) from invoice.invoices where project_id = ${project.id}) as is_sum_of_payments
      from payout.balances b where b.project_id = ${project.id} and b.environment = 'sandbox' and b.currency = 'BTC'`;
    expect(balance).toEqual({ available: expect.any(String), is_sum_of_credits: true, is_sum_of_payments: true });
  } finally {
    await sql.end({ timeout: 5 });
  }
  console.log(`${created.length} invoices (${createdAtKill} before and ${createdAfterKill} after killing ${leader}, the invoice stream's leader)`);
}, 180_000);
