/**
 * Issue 27 point 7: one account must not delay every merchant's webhooks. The notifier in-process
 * on real Postgres and NATS with a small replica (8 slots, 2 per project, 3 per host) and real
 * receivers on distinct loopback hosts (127.0.0.1 and 127.0.0.3 slow ones, 127.0.0.2 the other merchant's):
 * slots are counted per project and per host of the URL actually called, never per saved URL, and
 * test events and redeliveries are limited per project.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson, type JsonValue } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { errorFacts } from '@coinvoice/runtime';
import { InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { awayFromWindowEdge } from '../../../test/support/async';
import { Receiver, startNotifier, type Harness } from './support/harness';

let h: Harness;
const receivers: Receiver[] = [];

beforeAll(async () => {
  h = await startNotifier({
    WEBHOOK_MAX_CONCURRENCY: '8',
    WEBHOOK_MAX_PER_PROJECT: '2',
    WEBHOOK_MAX_PER_HOST: '3',
    WEBHOOK_TIMEOUT_MS: '8000',
    WEBHOOK_RETRY_SCHEDULE: '30s',
    RATE_LIMIT_WEBHOOK_TEST_PER_PROJECT: '10/1m',
    RATE_LIMIT_WEBHOOK_REDELIVER_PER_PROJECT: '5/1m',
  });
});
afterAll(async () => {
  await h?.dispose();
  for (const r of receivers) await r.stop();
});

async function receiver(host: string, respond?: ConstructorParameters<typeof Receiver>[0]): Promise<Receiver> {
  const r = await new Receiver(respond).start(host);
  receivers.push(r);
  return r;
}

function invoicePaid(projectId: string): JsonValue {
  return toJson(
    InvoicePaidSchema,
    create(InvoicePaidSchema, {
      invoiceId: randomUUID(),
      projectId,
      status: 'Paid',
      amount: '12.5',
      currency: 'USDT',
      environment: 'live',
      transactionHash: 'cd'.repeat(32),
      paidAt: timestampFromDate(new Date()),
    }),
  );
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Another merchant's invoice.paid: how long from publish to its receiver. */
async function otherMerchantsPaidLatency(): Promise<number> {
  const healthy = await receiver('127.0.0.2');
  const other = h.auth.addProject({ webhookUrl: healthy.url });
  const published = Date.now();
  await h.publish('invoice.paid', invoicePaid(other.id));
  const [request] = await healthy.waitFor(1, 15_000);
  return request!.at - published;
}

test('a slow receiver and 30 × (change the URL, send a test event): the project holds 2 slots, 20 test events are 429, another merchant’s invoice.paid is not delayed', async () => {
  await awayFromWindowEdge(60, 15_000); // the 30 calls count in one minute's window
  const slow = await receiver('127.0.0.1', () => 'hang');
  const attacker = h.auth.addProject({ webhookUrl: slow.url });
  const refused: Array<ReturnType<typeof errorFacts>> = [];
  for (let i = 0; i < 30; i++) {
    // A new URL before each test event: a limit counting saved URLs would give each its own slots.
    h.auth.projects.set(attacker.id, { ...attacker, webhookUrl: `${slow.url}?round=${i}` });
    await h.client.sendTestWebhook({ projectId: attacker.id }).catch((err: unknown) => refused.push(errorFacts(err)));
  }
  expect(refused).toHaveLength(20);
  for (const facts of refused) {
    expect(facts.code).toBe('rate_limited');
    expect(facts.rateLimit).toMatchObject({ policy: 'webhook-test-project', limit: 10, windowSeconds: 60 });
    expect(facts.rateLimit?.retryAfterSeconds).toBeGreaterThan(0);
  }

  await slow.waitFor(2);
  await pause(500);
  // Its project's share: two attempts in flight, whatever URLs the test events were saved with.
  expect(slow.requests).toHaveLength(2);

  // Not after the slow receiver's attempts time out (8 s): at once (the bound leaves room for a loaded machine).
  expect(await otherMerchantsPaidLatency()).toBeLessThan(3_000);
});

test('several projects pointing at one slow host hold at most its 3 slots; another host’s merchant is not delayed', async () => {
  const slow = await receiver('127.0.0.3', () => 'hang');
  for (let p = 0; p < 3; p++) {
    const project = h.auth.addProject({ webhookUrl: `${slow.url}/project-${p}` });
    for (let i = 0; i < 3; i++) await h.publish('invoice.paid', invoicePaid(project.id));
  }
  await slow.waitFor(3);
  await pause(1_000);
  // 3 projects × 2 slots would be 6: the host's limit holds them to 3.
  expect(slow.requests).toHaveLength(3);

  // Not after the slow receiver's attempts time out (8 s): at once (the bound leaves room for a loaded machine).
  expect(await otherMerchantsPaidLatency()).toBeLessThan(3_000);
});

test('redeliveries are limited per project like test events: one session cannot make coinvoice POST without end (RATE_LIMIT_WEBHOOK_REDELIVER_PER_PROJECT)', async () => {
  const target = await receiver('127.0.0.2');
  const project = h.auth.addProject({ webhookUrl: target.url });
  await h.publish('invoice.paid', invoicePaid(project.id));
  await target.waitFor(1, 15_000);
  await awayFromWindowEdge(60, 15_000); // the 12 calls count in one minute's window
  const [original] = await h.sql<{ id: string }[]>`select id::text from webhook_deliveries where project_id = ${project.id}`;
  const refused: Array<ReturnType<typeof errorFacts>> = [];
  let queued = 0;
  for (let i = 0; i < 12; i++) {
    await h.client.redeliverWebhook({ projectId: project.id, deliveryId: original!.id }).then(
      () => queued++,
      (err: unknown) => refused.push(errorFacts(err)),
    );
  }
  expect(queued).toBe(5);
  expect(refused).toHaveLength(7);
  for (const facts of refused) expect(facts).toMatchObject({ code: 'rate_limited', rateLimit: { policy: 'webhook-redeliver-project', limit: 5, windowSeconds: 60 } });
  await target.waitFor(6, 15_000);
  await pause(500);
  expect(target.requests).toHaveLength(6);
  // Another project's redeliveries are its own.
  const other = h.auth.addProject({ webhookUrl: target.url });
  await h.publish('invoice.paid', invoicePaid(other.id));
  const [otherOriginal] = await eventuallyRows(other.id);
  await expect(h.client.redeliverWebhook({ projectId: other.id, deliveryId: otherOriginal!.id })).resolves.toBeDefined();
});

async function eventuallyRows(projectId: string): Promise<Array<{ id: string }>> {
  for (let i = 0; i < 200; i++) {
    const rows = await h.sql<{ id: string }[]>`select id::text from webhook_deliveries where project_id = ${projectId}`;
    if (rows.length > 0) return rows;
    await pause(50);
  }
  throw new Error(`no delivery of project ${projectId}`);
}
