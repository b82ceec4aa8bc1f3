/**
 * Issue 11, Done-when 2: a service process SIGKILLed while 8 clients create and pay sandbox
 * invoices, retrying as a careful integrator does (an Idempotency-Key on every create; a retry on
 * 503/504 or no answer). The launcher starts the killed process again, as Kubernetes would.
 *
 * What must hold, for each of auth, invoice, payout and notifier killed in turn:
 * - no answer is 409 unless the invoice really is not payable any more (it is Paid: an earlier
 *   attempt whose answer was lost — no answer, or 504 — did pay it; never after only 503s, which
 *   say the call never reached the service);
 * - no answer is a 5xx other than 503/504, and none echoes a socket error;
 * - every invoice ends Paid, with exactly one invoice.paid event delivered to the webhook (one
 *   webhook-id; a delivery repeated with the same id is at-least-once and allowed only when the
 *   notifier itself was killed mid-delivery);
 * - the ledger credits each paid invoice exactly once (the balance is the sum).
 */
import Decimal from 'decimal.js';
import { apiKeyHeader, createProjectWithKey, GatewayClient, registerMerchant, type ProjectFixture } from '../support/http';
import { bootSystem, isAlive, type BootedSystem } from '../support/system';
import { FAST_SYSTEM_ENV, INVOICE_BODY, paidInvoiceIdOf, Receiver, sleep, timed, waitUntil, webhookHeadersOf, type Timed } from './support';

const LANES = 8;
/** Load before the kill, and after it (long enough for the restarted process to serve again). */
const BEFORE_KILL_MS = 1_000;
const AFTER_KILL_MS = 4_000;
/** How long one client keeps retrying one call before the test calls it a failure. */
const RETRY_BUDGET_MS = 15_000;

let system: BootedSystem;
let receiver: Receiver;
let api: GatewayClient;
let project: ProjectFixture;

beforeAll(async () => {
  receiver = await new Receiver().start();
  system = await bootSystem({ env: FAST_SYSTEM_ENV });
  api = new GatewayClient(system.gatewayUrl);
  const merchant = await registerMerchant(api);
  project = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: receiver.url });
}, 90_000);

afterAll(async () => {
  await system?.stop().catch(() => undefined);
  await receiver?.stop().catch(() => undefined);
}, 30_000);

interface Outcome {
  invoiceId: string;
  amountReceived: string;
}

/** Every answer that broke a rule, with what was asked. */
const violations: string[] = [];
const retriable = (res: Timed) => res.status === 0 || res.status === 503 || res.status === 504;

function checkAnswer(what: string, res: Timed): void {
  if (res.status >= 500 && res.status !== 503 && res.status !== 504) violations.push(`${what} → ${res.status} ${res.text}`);
  if (/ECONNRESET|ECONNREFUSED|socket hang up|RST_STREAM/i.test(res.text)) violations.push(`${what} echoed a socket error: ${res.text}`);
}

/** Calls until an answer that is not "try again", within the retry budget. */
async function withRetries(what: string, call: () => Promise<Timed>): Promise<{ final: Timed; attempts: Timed[] }> {
  const attempts: Timed[] = [];
  const started = Date.now();
  for (;;) {
    const res = await call();
    attempts.push(res);
    checkAnswer(what, res);
    if (!retriable(res) || Date.now() - started > RETRY_BUDGET_MS) return { final: res, attempts };
    await sleep(50);
  }
}

async function createAndPay(tag: string): Promise<Outcome | undefined> {
  const idempotencyKey = `kill-${tag}`;
  const created = await withRetries(`create ${tag}`, () =>
    timed(() => api.post('/api/invoice', { ...INVOICE_BODY, orderId: tag }, { headers: { ...apiKeyHeader(project.key), 'idempotency-key': idempotencyKey } })),
  );
  if (created.final.status !== 201) {
    violations.push(`create ${tag} ended ${created.final.status} ${created.final.text}`);
    return undefined;
  }
  const invoiceId = created.final.body.id as string;
  const paid = await withRetries(`pay ${tag}`, () => timed(() => api.post(`/api/invoice/${invoiceId}/sandbox/pay`, {}, { headers: apiKeyHeader(project.key) })));
  if (paid.final.status === 200) return { invoiceId, amountReceived: String(paid.final.body.amountReceived) };
  if (paid.final.status === 409) {
    // Only right when an earlier attempt did pay it and its answer was lost on the way: no answer,
    // or 504 ("may have taken effect"). A 503 says the call never reached the service.
    const earlierLost = paid.attempts.slice(0, -1).some((res) => res.status === 0 || res.status === 504);
    const now = await timed(() => api.get(`/api/invoice/${invoiceId}`, { headers: apiKeyHeader(project.key) }));
    if (!earlierLost || now.body?.status !== 'Paid') {
      violations.push(`pay ${tag} → 409 although the invoice was ${now.body?.status} (earlier attempt lost: ${earlierLost})`);
      return undefined;
    }
    return { invoiceId, amountReceived: String(now.body.amountReceived) };
  }
  violations.push(`pay ${tag} ended ${paid.final.status} ${paid.final.text}`);
  return undefined;
}

async function loadWhileKilling(service: 'auth' | 'invoice' | 'payout' | 'notifier'): Promise<{ outcomes: Outcome[]; killedPid: number }> {
  const outcomes: Outcome[] = [];
  const started = Date.now();
  let sequence = 0;
  const lanes = Array.from({ length: LANES }, async (_, lane) => {
    while (Date.now() - started < BEFORE_KILL_MS + AFTER_KILL_MS) {
      const outcome = await createAndPay(`${service}-${lane}-${sequence++}`);
      if (outcome) outcomes.push(outcome);
    }
  });
  await sleep(BEFORE_KILL_MS);
  const killedPid = system.current()[service]!.pid;
  process.kill(killedPid, 'SIGKILL');
  await Promise.all(lanes);
  return { outcomes, killedPid };
}

/** invoice.paid deliveries per invoice: the webhook-ids seen and how many requests. */
function paidDeliveries(): Map<string, { ids: Set<string>; requests: number }> {
  const byInvoice = new Map<string, { ids: Set<string>; requests: number }>();
  for (const req of receiver.requests) {
    const invoiceId = paidInvoiceIdOf(req);
    if (!invoiceId) continue;
    const entry = byInvoice.get(invoiceId) ?? { ids: new Set<string>(), requests: 0 };
    entry.ids.add(webhookHeadersOf(req)['webhook-id'] ?? '');
    entry.requests++;
    byInvoice.set(invoiceId, entry);
  }
  return byInvoice;
}

async function btcBalance(): Promise<{ total: string; available: string }> {
  const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(project.key) });
  if (res.status !== 200) throw new Error(`balance → ${res.status} ${res.text}`);
  const btc = (res.body.balances as Array<{ currency: string; total: number; available: number }>).find((b) => b.currency === 'BTC');
  return { total: String(btc?.total ?? 0), available: String(btc?.available ?? 0) };
}

const allOutcomes: Outcome[] = [];

describe.each(['invoice', 'auth', 'payout', 'notifier'] as const)('%s SIGKILLed under load', (service) => {
  test(`no 409 for a payable invoice, every invoice Paid with one invoice.paid and one ledger credit`, async () => {
    violations.length = 0;
    const { outcomes, killedPid } = await loadWhileKilling(service);
    allOutcomes.push(...outcomes);
    expect(violations).toEqual([]);
    expect(outcomes.length).toBeGreaterThan(LANES);

    // The launcher started it again, and it serves.
    await waitUntil(`${service} restarted`, 20_000, async () => {
      const now = system.current()[service];
      return now && now.pid !== killedPid && isAlive(now.pid) ? true : undefined;
    });

    for (const { invoiceId } of outcomes) {
      const res = await api.get(`/api/invoice/${invoiceId}`, { headers: apiKeyHeader(project.key) });
      expect([invoiceId, res.body?.status]).toEqual([invoiceId, 'Paid']);
    }

    // Exactly one invoice.paid event per invoice reaches the webhook (same id on a redelivery).
    const deliveries = await waitUntil('every invoice.paid delivered', 30_000, async () => {
      const seen = paidDeliveries();
      return outcomes.every((o) => seen.has(o.invoiceId)) ? seen : undefined;
    });
    for (const { invoiceId } of outcomes) {
      const entry = deliveries.get(invoiceId)!;
      expect([invoiceId, entry.ids.size]).toEqual([invoiceId, 1]);
      if (service !== 'notifier') expect([invoiceId, entry.requests]).toEqual([invoiceId, 1]);
    }

    // The ledger credited every paid invoice once: the balance is the sum of what was paid so far.
    const expected = allOutcomes.reduce((sum, o) => sum.plus(o.amountReceived), new Decimal(0));
    // Within 20 s: what the killed process held comes again after ack_wait (5 s), not 30 s
    // (docs/architecture.md#ack-wait).
    const balance = await waitUntil('the ledger caught up', 20_000, async () => {
      const b = await btcBalance().catch(() => undefined);
      return b && new Decimal(b.total).gte(expected) ? b : undefined;
    });
    await sleep(500); // a double credit would show up shortly after
    expect(new Decimal((await btcBalance()).total).toFixed(8)).toBe(expected.toFixed(8));
    expect(balance.available).toBe(balance.total);
  }, 120_000);
});
