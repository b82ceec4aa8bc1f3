/**
 * Issue 28 point 2 on a real chain: anvil, the whole system booted as `npm start` boots it with
 * `watch ethereum`, the SHIPPED retry schedule (5 s, 5 min, …), and a shop whose receiver rejects
 * invoice.confirming. invoice.paid must reach it within 30 s of the invoice turning Paid (before
 * this work it waited behind confirming's retries: minutes), and a successful Redeliver of the
 * rejected event ends its retries (it is not delivered a third time).
 */
import { markEmailVerified } from '../support/accounts';
import { mine, sendEth, startAnvil, type Anvil } from '../support/anvil';
import { apiKeyHeader, bearer, createProjectWithKey, GatewayClient, registerMerchant, type MerchantFixture, type ProjectFixture } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';
import { deleteStreams, eventually, Receiver, type ReceivedRequest } from './webhooks.support';

const CONFIRMATIONS = 3;

let anvil: Anvil;
let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;
let merchant: MerchantFixture;
let live: ProjectFixture;
/** The shop fixed its handler of invoice.confirming. */
let fixed = false;

const typeOf = (q: ReceivedRequest) => String(q.headers['webhook-event-type']);

beforeAll(async () => {
  anvil = await startAnvil();
  receiver = await new Receiver((q) => (typeOf(q) === 'invoice.confirming' && !fixed ? { status: 500, body: 'no handler for confirming' } : { status: 200 })).start();
  system = await bootSystem({
    env: {
      CHAIN_ETHEREUM_RPC_URL: anvil.url,
      CHAIN_ETHEREUM_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_ETHEREUM_POLL_MS: '100',
      PASSWORD_HASH_MEMORY_KIB: '1024',
      // WEBHOOK_RETRY_SCHEDULE and WEBHOOK_TIMEOUT_MS as shipped.
    },
  });
  api = new GatewayClient(system.gatewayUrl);
  merchant = await registerMerchant(api);
  await markEmailVerified(system, merchant.merchantId);
  live = await createProjectWithKey(api, merchant, 'live', { webhookUrl: receiver.url });
}, 120_000);

afterAll(async () => {
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver?.stop();
  await anvil?.stop();
});

async function invoiceStatus(id: string): Promise<string> {
  const res = await api.get(`/api/invoice/${id}`, { headers: apiKeyHeader(live.key) });
  if (res.status !== 200) throw new Error(`get failed: ${res.status} ${res.text}`);
  return res.body.status as string;
}

test('a receiver that rejects invoice.confirming gets invoice.paid within 30 s of Paid; a successful Redeliver ends confirming’s retries', async () => {
  const created = await api.post(
    '/api/invoice',
    { priceAmount: '20.00', priceCurrency: 'USD', payCurrency: 'ETH', orderId: 'order-ships-on-paid', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
    { headers: apiKeyHeader(live.key) },
  );
  expect(created.status).toBe(201);
  const invoice = created.body as { id: string; address: string; amountExpected: number };
  const forInvoice = (q: ReceivedRequest) => q.body.includes(invoice.id);

  await sendEth(anvil, invoice.address, String(invoice.amountExpected));
  await eventually(async () => ((await invoiceStatus(invoice.id)) === 'Confirming' ? true : undefined), 20_000, 'Confirming');
  const [rejected] = await receiver.waitFor(1, 15_000, (q) => forInvoice(q) && typeOf(q) === 'invoice.confirming');

  await mine(anvil, CONFIRMATIONS);
  await eventually(async () => ((await invoiceStatus(invoice.id)) === 'Paid' ? true : undefined), 20_000, 'Paid');
  const paidSeen = Date.now();
  const [paid] = await receiver.waitFor(1, 30_000, (q) => forInvoice(q) && typeOf(q) === 'invoice.paid');
  expect(paid!.at - paidSeen).toBeLessThan(30_000);
  // Receivers order by occurredAt: paid is the newer state, whichever arrives last.
  expect(Date.parse(JSON.parse(paid!.body).occurredAt)).toBeGreaterThan(Date.parse(JSON.parse(rejected!.body).occurredAt));

  // The shop fixes its handler and presses Redeliver on the failing delivery.
  const log = await api.get(`/api/merchant/projects/${live.id}/webhook-deliveries?invoiceId=${invoice.id}&eventType=invoice.confirming`, { headers: bearer(merchant.token) });
  expect(log.status).toBe(200);
  const original = (log.body.items as Array<{ id: string; status: string; redeliveryOf: string | null }>).find((d) => d.redeliveryOf === null);
  expect(original?.status).toBe('pending'); // its retries are still scheduled
  fixed = true;
  const redelivered = await api.post(`/api/merchant/projects/${live.id}/webhook-deliveries/${original!.id}/redeliver`, undefined, { headers: bearer(merchant.token) });
  expect(redelivered.status).toBe(201);
  await eventually(async () => {
    const res = await api.get(`/api/merchant/projects/${live.id}/webhook-deliveries/${original!.id}`, { headers: bearer(merchant.token) });
    return res.body.status === 'succeeded' && res.body.nextAttemptAt === null ? res.body : undefined;
  }, 15_000, 'the original delivery closed by the redelivery');
  const confirmingCount = receiver.requests.filter((q) => forInvoice(q) && typeOf(q) === 'invoice.confirming').length;
  // Past the first retry's time (5 s ± 20 %): nothing more of confirming.
  await new Promise((resolve) => setTimeout(resolve, 6_500));
  expect(receiver.requests.filter((q) => forInvoice(q) && typeOf(q) === 'invoice.confirming')).toHaveLength(confirmingCount);
  expect(receiver.requests.filter((q) => forInvoice(q) && typeOf(q) === 'invoice.paid')).toHaveLength(1);
});
