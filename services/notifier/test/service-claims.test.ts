/**
 * What makes the delivery worker claim (docs/webhook-delivery.md#claims). A claim reads the due
 * deliveries in due order and skips those of projects whose slots are all in use here, so one made
 * while a merchant's backlog is due and its slots are full walks that whole backlog to claim
 * nothing. A delivery queued for such a project therefore does not wake the worker: a slot
 * freeing does. The notifier in-process on real Postgres and NATS; claims counted by its
 * notifier_webhook_claims_total.
 */
import { randomUUID } from 'node:crypto';
import { invoicePaid } from './support/events';
import { eventually, Receiver, startNotifier, type Harness } from './support/harness';

const POLL_MS = 1_000;

let h: Harness;
let slow: Receiver;

beforeAll(async () => {
  h = await startNotifier({ WEBHOOK_MAX_PER_PROJECT: '2', WEBHOOK_POLL_INTERVAL_MS: String(POLL_MS), WEBHOOK_TIMEOUT_MS: '20000' });
  slow = await new Receiver(() => 'hang').start('127.0.0.5');
});
afterAll(async () => {
  await h?.dispose();
  await slow?.stop();
});

async function claimsSoFar(): Promise<number> {
  const text = await (await fetch(`${h.svc.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('notifier_webhook_claims_total '));
  if (!line) throw new Error('notifier_webhook_claims_total is not exported');
  return Number(line.split(' ')[1]);
}

test("40 events of a project whose slots are all in use are queued without a claim each; a slot freeing claims the next", async () => {
  const project = h.auth.addProject({ webhookUrl: slow.url });
  const publish = () => {
    const invoiceId = randomUUID();
    return h.publish('invoice.paid', invoicePaid(project.id, { invoiceId }), { key: invoiceId });
  };
  await publish();
  await publish();
  await slow.waitFor(2); // both slots of the project held by attempts that hang

  const before = await claimsSoFar();
  const started = Date.now();
  for (let i = 0; i < 40; i++) await publish();
  await eventually(async () => {
    const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where project_id = ${project.id}`;
    expect(row?.n).toBe(42);
    return true;
  });
  const claims = (await claimsSoFar()) - before;
  // The worker's poll may claim once a second; a claim per queued event would be ~40.
  expect(claims).toBeLessThanOrEqual(3 + Math.ceil((Date.now() - started) / POLL_MS));
  expect(slow.requests).toHaveLength(2);

  // The receiver answers again: each slot that frees claims what is queued, and all of it goes.
  slow.respond = () => ({ status: 204 });
  slow.release(204);
  await slow.waitFor(42);
});
