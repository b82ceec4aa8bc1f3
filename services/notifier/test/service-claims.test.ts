/**
 * What makes the delivery worker claim (docs/webhook-delivery.md#claims). A claim reads the due
 * deliveries in due order and skips those of projects whose slots are all in use here, so one made
 * while a merchant's backlog is due and its slots are full walks that whole backlog to claim
 * nothing. A delivery queued for such a project therefore does not wake the worker: a slot
 * freeing does; and once a claim over every project found nothing, a freed slot claims for its own
 * project only, until something else gives a reason to look at the others. The notifier in-process
 * on real Postgres and NATS; claims counted by its notifier_webhook_claims_total{scope}.
 */
import { randomUUID } from 'node:crypto';
import { invoicePaid } from './support/events';
import { eventually, Receiver, startNotifier, type Harness } from './support/harness';

const POLL_MS = 1_000;

let h: Harness;
const receivers: Receiver[] = [];

beforeAll(async () => {
  h = await startNotifier({ WEBHOOK_MAX_PER_PROJECT: '2', WEBHOOK_POLL_INTERVAL_MS: String(POLL_MS), WEBHOOK_TIMEOUT_MS: '20000' });
});
afterAll(async () => {
  await h?.dispose();
  for (const r of receivers) await r.stop();
});

/** A receiver whose first two requests hang (they hold the project's two slots) until release(). */
async function holdingReceiver(host: string): Promise<Receiver> {
  const r = await new Receiver((_, index) => (index < 2 ? 'hang' : { status: 204, delayMs: 10 })).start(host);
  receivers.push(r);
  return r;
}

/** Claims made so far, of one scope ("all", "freed_projects") or of both. */
async function claimsSoFar(scope?: string): Promise<number> {
  const text = await (await fetch(`${h.svc.adminUrl}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('notifier_webhook_claims_total{') && (scope === undefined || l.includes(`scope="${scope}"`)))
    .reduce((sum, l) => sum + Number(l.split(' ')[1]), 0);
}

/** Publishes an invoice.paid of `projectId` (its own invoice: no ordering between them). */
function publishPaid(projectId: string): Promise<string> {
  const invoiceId = randomUUID();
  return h.publish('invoice.paid', invoicePaid(projectId, { invoiceId }), { key: invoiceId });
}

test("40 events of a project whose slots are all in use are queued without a claim each; a slot freeing claims the next", async () => {
  const slow = await holdingReceiver('127.0.0.5');
  const project = h.auth.addProject({ webhookUrl: slow.url });
  await publishPaid(project.id);
  await publishPaid(project.id);
  await slow.waitFor(2); // both slots of the project held by attempts that hang

  const before = await claimsSoFar();
  const started = Date.now();
  for (let i = 0; i < 40; i++) await publishPaid(project.id);
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
  slow.release(204);
  await slow.waitFor(42);
});

test('a backlog of 60 drains through its freed slots: claims over every project (each walking the backlog) about one a second, not two per webhook', async () => {
  const receiver = await holdingReceiver('127.0.0.6');
  const project = h.auth.addProject({ webhookUrl: receiver.url });
  for (let i = 0; i < 62; i++) await publishPaid(project.id);
  await receiver.waitFor(2);
  await eventually(async () => {
    const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where project_id = ${project.id}`;
    expect(row?.n).toBe(62);
    return true;
  });

  const before = { all: await claimsSoFar('all'), freed: await claimsSoFar('freed_projects') };
  const started = Date.now();
  receiver.release(204);
  await receiver.waitFor(62);
  const seconds = Math.ceil((Date.now() - started) / 1_000);
  const all = (await claimsSoFar('all')) - before.all;
  const freed = (await claimsSoFar('freed_projects')) - before.freed;
  // Each webhook's freed slot claims the next of its project (≈ 60); a claim over every project
  // happens when the knowledge that the others have nothing runs out (POLL_MS), two at a time.
  expect(all).toBeLessThanOrEqual(4 + 2 * Math.ceil((seconds * 1_000) / POLL_MS));
  expect(freed).toBeGreaterThanOrEqual(40);
});

test('webhooks sent straight from the consumer (a slot free for each) leave nothing to claim: no claim per webhook', async () => {
  const receiver = await new Receiver(() => ({ status: 204, delayMs: 5 })).start('127.0.0.7');
  receivers.push(receiver);
  const project = h.auth.addProject({ webhookUrl: receiver.url });
  await publishPaid(project.id);
  await receiver.waitFor(1);

  const before = await claimsSoFar();
  const started = Date.now();
  for (let i = 0; i < 30; i++) {
    await publishPaid(project.id);
    await receiver.waitFor(i + 2);
    // Its attempt recorded (its slot free again) before the next event: the next finds a slot.
    await eventually(async () => {
      const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where project_id = ${project.id} and status = 'succeeded'`;
      expect(row?.n).toBe(i + 2);
      return true;
    });
  }
  const claims = (await claimsSoFar()) - before;
  // Each attempt's end freed a slot, and each freed slot claimed: ~30. Now the claim over every
  // project that found nothing stands until the poll interval runs out (or a reason to look comes).
  expect(claims).toBeLessThanOrEqual(2 + Math.ceil((Date.now() - started) / POLL_MS));
});
