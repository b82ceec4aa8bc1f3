/**
 * Issue 5, point 4, end to end: two notifier processes share the work (one durable JetStream
 * consumer per stream, deliveries claimed with SKIP LOCKED). 500 sandbox payments through the
 * gateway → 500 webhooks, each exactly once, while the receiver answers 2xx promptly.
 */
import { Webhook } from 'standardwebhooks';
import { createProjectWithKey, GatewayClient, registerMerchant } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';
import { allDeliveries, bounded, createInvoice, deleteStreams, eventually, logOf, payInvoice, Receiver } from './webhooks.support';

const EVENTS = 500;

let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await new Receiver().start();
  system = await bootSystem({ env: { NOTIFIER_REPLICAS: '2', PASSWORD_HASH_MEMORY_KIB: '1024' } });
  api = new GatewayClient(system.gatewayUrl);
}, 120_000);

afterAll(async () => {
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver?.stop();
});

test(`two notifier replicas: ${EVENTS} events, each delivered exactly once`, async () => {
  expect(Object.keys(system.current()).filter((name) => name.startsWith('notifier')).sort()).toEqual(['notifier', 'notifier-2']);
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: receiver.url });

  // Create first, then pay: the payments (and so the events) come in a burst.
  const invoices = await bounded(EVENTS, 8, () => createInvoice(api, project.key));
  const started = Date.now();
  await bounded(EVENTS, 8, (i) => payInvoice(api, project.key, invoices[i]?.id ?? ''));
  await receiver.waitFor(EVENTS, 60_000);
  const elapsed = Date.now() - started;
  // Anything late (a duplicate) would show up now.
  await new Promise((resolve) => setTimeout(resolve, 1_500));

  const ids = receiver.requests.map((q) => String(q.headers['webhook-id']));
  const invoiceIds = receiver.requests.map((q) => (JSON.parse(q.body) as { invoiceId: string }).invoiceId);
  expect(receiver.requests).toHaveLength(EVENTS);
  expect(new Set(ids).size).toBe(EVENTS);
  expect(new Set(invoiceIds)).toEqual(new Set(invoices.map((i) => i.id)));
  const wh = new Webhook(project.webhookSecret);
  for (const q of receiver.requests) wh.verify(q.body, q.headers as Record<string, string>);

  const log = await eventually(async () => {
    const items = await allDeliveries(api, merchant, project.id);
    return items.length === EVENTS && items.every((d) => d.status === 'succeeded') ? items : undefined;
  }, 20_000, 'every delivery succeeded');
  expect(log.every((d) => d.attemptCount === 1)).toBe(true);

  // Both replicas did part of the work.
  const delivered = (name: string) => logOf(system, name).split('\n').filter((line) => line.includes('"webhook delivered"')).length;
  const byReplica = [delivered('notifier'), delivered('notifier-2')];
  expect(byReplica[0]).toBeGreaterThan(0);
  expect(byReplica[1]).toBeGreaterThan(0);
  expect((byReplica[0] ?? 0) + (byReplica[1] ?? 0)).toBe(EVENTS);
  console.log(`${EVENTS} webhooks in ${elapsed} ms from the first payment; delivered by replica: ${byReplica.join(' + ')}`);
}, 180_000);
