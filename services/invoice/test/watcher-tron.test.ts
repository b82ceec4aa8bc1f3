/**
 * Live TRX payments through the watcher role and the Tron adapter, against a Tron full-node HTTP
 * API STAND-IN (no Tron node installs here) serving blocks and TransferContract transactions in the
 * API's JSON shapes: Confirming once mined, still Confirming at 19 confirmations, Paid at 20 with
 * one invoice.paid; a failed transaction (contractRet not SUCCESS) credits nothing.
 */
import { createRequest, liveProject, waitFor, type Harness } from './support/harness';
import type { TronStandIn } from './support/tron-stand-in';
import { startTronWatcherHarness, type TronWatcherHarness } from './support/tron-watcher-harness';

let t: TronWatcherHarness;
let h: Harness;
let chain: TronStandIn;

beforeAll(async () => {
  t = await startTronWatcherHarness();
  ({ h, chain } = t);
}, 60_000);

afterAll(async () => {
  await t?.dispose();
});

async function state(invoiceId: string) {
  const [invoice] = await h.sql<{ status: string; confirmations_required: number }[]>`select status, confirmations_required from invoices where id = ${invoiceId}`;
  const payments = await h.sql<{ transaction_hash: string; confirmations: number; status: string; amount: string }[]>`
    select transaction_hash, confirmations, status, amount::text from payments where invoice_id = ${invoiceId}`;
  const events = await h.sql<{ event_type: string }[]>`select event_type from outbox where payload->>'invoiceId' = ${invoiceId} order by seq`;
  return { ...invoice!, payments: [...payments], events: events.map((e) => e.event_type) };
}

const until = (invoiceId: string, what: string, ok: (s: Awaited<ReturnType<typeof state>>) => boolean) =>
  waitFor(what, async () => {
    const s = await state(invoiceId);
    return ok(s) ? s : undefined;
  }, 20_000);

test('TRX: a failed transfer credits nothing; a successful one is Confirming once mined, Paid at 20 confirmations with one invoice.paid', async () => {
  const created = (await h.client.createInvoice(createRequest(liveProject(), { priceAmount: '27.00', priceCurrency: 'USD', payCurrency: 'TRX' }))).invoice!;
  expect(created.address).toMatch(/^T[1-9A-HJ-NP-Za-km-z]{33}$/);
  expect(created.amountExpected).toBe('100'); // 27 / 0.27 (the static table)
  expect((await state(created.id)).confirmations_required).toBe(20);

  const failed = chain.transfer(created.address, 100_000_000, false);
  chain.mine([failed]);
  const good = chain.transfer(created.address, 100_000_000);
  chain.mine([good]);
  const confirming = await until(created.id, 'Confirming', (s) => s.status === 'Confirming');
  expect(confirming.payments).toEqual([expect.objectContaining({ transaction_hash: good.txID, amount: '100', confirmations: 1 })]);

  for (let i = 0; i < 18; i++) chain.mine([]);
  const nineteen = await until(created.id, '19 confirmations', (s) => s.payments[0]?.confirmations === 19);
  expect(nineteen.status).toBe('Confirming');
  chain.mine([]);
  const paid = await until(created.id, 'Paid', (s) => s.status === 'Paid');
  expect(paid.payments).toEqual([expect.objectContaining({ confirmations: 20, status: 'confirmed' })]);
  chain.mine([]);
  await until(created.id, '21 confirmations', (s) => s.payments[0]?.confirmations === 21);
  expect((await state(created.id)).events.filter((e) => e === 'invoice.paid')).toHaveLength(1);
});
