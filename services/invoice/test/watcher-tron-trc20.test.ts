/**
 * Live TRC-20 payments on Tron (USDT; USDC where configured) through the watcher role and the Tron
 * adapter, against a Tron full-node HTTP API STAND-IN (no Tron node installs here) whose
 * TransactionInfos carry the Transfer events as java-tron writes them (docs/networks.md#tron-trc-20):
 * a USDT invoice paid by a token transfer is Paid at 20 confirmations with its exact base units; one
 * batch-payout transaction with two Transfer logs pays two invoices; a reorg that drops the block
 * reopens the invoice and orphans the payment; a reverted call and another token's transfer pay
 * nothing; USDT sent to a TRX invoice's address is another asset, reported and never credited; USDC
 * is watched once its contract is configured.
 */
import { randomBytes } from 'node:crypto';
import { createRequest, liveProject, waitFor, type Harness } from './support/harness';
import { base58CheckEncode } from './support/independent-codecs';
import type { TronStandIn } from './support/tron-stand-in';
import { startTronWatcherHarness, type TronWatcherHarness } from './support/tron-watcher-harness';

const USDT = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
/** Circle's former USDC contract on Tron: taken only because this deployment configures it. */
const USDC = 'TEkxiTehnzSmSe2XqrBj4w32RUN966rdz8';

/** A fresh Tron address (a contract of nobody's), base58check of 0x41 ‖ 20 random bytes. */
const someTronAddress = () => base58CheckEncode(Buffer.concat([Buffer.from([0x41]), randomBytes(20)]));

let t: TronWatcherHarness;
let h: Harness;
let chain: TronStandIn;

beforeAll(async () => {
  t = await startTronWatcherHarness({ CHAIN_TRON_USDC_CONTRACT: USDC });
  ({ h, chain } = t);
}, 60_000);

afterAll(async () => {
  await t?.dispose();
});

async function state(invoiceId: string) {
  const [invoice] = await h.sql<{ status: string; amount_received: string; pay_network: string }[]>`
    select status, amount_received::text, pay_network from invoices where id = ${invoiceId}`;
  const payments = await h.sql<{ transaction_hash: string; output_index: number; asset: string; amount: string; confirmations: number; status: string; reported_as: string | null }[]>`
    select transaction_hash, output_index, asset, amount::text, confirmations, status, reported_as from payments where invoice_id = ${invoiceId} order by output_index`;
  const events = await h.sql<{ event_type: string }[]>`select event_type from outbox where payload->>'invoiceId' = ${invoiceId} order by seq`;
  return { ...invoice!, payments: [...payments], events: events.map((e) => e.event_type) };
}

const until = (invoiceId: string, what: string, ok: (s: Awaited<ReturnType<typeof state>>) => boolean) =>
  waitFor(what, async () => {
    const s = await state(invoiceId);
    return ok(s) ? s : undefined;
  }, 20_000);

async function createInvoice(payCurrency: string, priceAmount: string, payNetwork = 'tron') {
  const created = (await h.client.createInvoice(createRequest(liveProject(), { priceAmount, priceCurrency: 'USD', payCurrency, payNetwork }))).invoice!;
  expect(created.address).toMatch(/^T[1-9A-HJ-NP-Za-km-z]{33}$/);
  return created;
}

/** Mines empty blocks until the chain's tip is `count` blocks above `height`'s block plus one (its confirmations). */
function confirmTo(height: number, confirmations: number): void {
  while (chain.tip.number < height + confirmations - 1) chain.mine([]);
}

test('USDT (TRC-20) transfers pay a Tron USDT invoice in exact base units: one unit short is PartiallyPaid; the last unit makes it Confirming, Paid at 20 confirmations', async () => {
  const invoice = await createInvoice('USDT', '27.50');
  expect(invoice.amountExpected).toBe('27.5');
  // A Tron address from the TRX key: the same format as a TRX invoice's.
  expect((await state(invoice.id)).pay_network).toBe('tron');

  const short = chain.trc20Transfer(USDT, invoice.address, 27_499_999);
  chain.mine([short]);
  const partial = await until(invoice.id, 'PartiallyPaid', (s) => s.status === 'PartiallyPaid');
  expect(partial.payments).toEqual([{ transaction_hash: short.txID, output_index: 0, asset: 'USDT', amount: '27.499999', confirmations: 1, status: 'seen', reported_as: null }]);

  const last = chain.trc20Transfer(USDT, invoice.address, 1);
  const block = chain.mine([last]);
  const confirming = await until(invoice.id, 'Confirming', (s) => s.status === 'Confirming');
  expect(confirming.amount_received).toBe('27.5');
  expect(confirming.payments.map((p) => p.amount)).toEqual(['27.499999', '0.000001']);

  confirmTo(block.number, 19);
  const nineteen = await until(invoice.id, '19 confirmations', (s) => s.payments.every((p) => p.confirmations >= 19));
  expect(nineteen.status).toBe('Confirming');
  chain.mine([]);
  const paid = await until(invoice.id, 'Paid', (s) => s.status === 'Paid');
  expect(paid.amount_received).toBe('27.5');
  expect(paid.payments).toEqual([
    expect.objectContaining({ transaction_hash: short.txID, status: 'confirmed', reported_as: 'paid' }),
    expect.objectContaining({ transaction_hash: last.txID, confirmations: 20, status: 'confirmed', reported_as: 'paid' }),
  ]);
  expect(paid.events.filter((e) => e === 'invoice.paid')).toHaveLength(1);
});

test('one batch-payout transaction with two Transfer logs pays two invoices, each by its own log index', async () => {
  const first = await createInvoice('USDT', '10.00');
  const second = await createInvoice('USDT', '12.34');
  const batch = chain.batchTransfer(someTronAddress(), USDT, [
    { to: first.address, amount: 10_000_000n },
    { to: second.address, amount: 12_340_000n },
  ]);
  const block = chain.mine([batch]);
  confirmTo(block.number, 20);
  const paidFirst = await until(first.id, 'first Paid', (s) => s.status === 'Paid');
  const paidSecond = await until(second.id, 'second Paid', (s) => s.status === 'Paid');
  expect(paidFirst.payments).toEqual([expect.objectContaining({ transaction_hash: batch.txID, output_index: 0, amount: '10' })]);
  expect(paidSecond.payments).toEqual([expect.objectContaining({ transaction_hash: batch.txID, output_index: 1, amount: '12.34' })]);
});

test('a reorg that drops the block reopens the invoice and orphans the payment; mined again, it is paid', async () => {
  const invoice = await createInvoice('USDT', '5.00');
  const pay = chain.trc20Transfer(USDT, invoice.address, 5_000_000);
  const block = chain.mine([pay]);
  chain.mine([]);
  await until(invoice.id, 'Confirming', (s) => s.status === 'Confirming' && s.payments[0]?.confirmations === 2);

  // The block leaves the chain; a longer chain without the transfer replaces it.
  chain.reorg(block.number);
  for (let i = 0; i < 3; i++) chain.mine([]);
  const reopened = await until(invoice.id, 'reopened', (s) => s.status === 'Waiting');
  expect(reopened.payments).toEqual([expect.objectContaining({ transaction_hash: pay.txID, status: 'orphaned' })]);
  expect(reopened.events).toEqual(['invoice.confirming', 'invoice.reopened']);

  // The same transaction mined again (it stays valid on the new chain): paid once.
  const again = chain.mine([pay]);
  confirmTo(again.number, 20);
  const paid = await until(invoice.id, 'Paid', (s) => s.status === 'Paid');
  expect(paid.payments).toEqual([expect.objectContaining({ transaction_hash: pay.txID, status: 'confirmed', confirmations: 20 })]);
  expect(paid.events.filter((e) => e === 'invoice.paid')).toHaveLength(1);
});

test('a reverted TRC-20 call and a transfer of another (unconfigured) token pay nothing', async () => {
  const invoice = await createInvoice('USDT', '8.00');
  const reverted = chain.trc20Transfer(USDT, invoice.address, 8_000_000, false);
  const otherToken = chain.trc20Transfer(someTronAddress(), invoice.address, 8_000_000);
  // A marker in the same block: once it is recorded, the block was scanned.
  const marker = await createInvoice('USDT', '1.00');
  const seen = chain.trc20Transfer(USDT, marker.address, 1_000_000);
  chain.mine([reverted, otherToken, seen]);
  await until(marker.id, 'the block scanned', (s) => s.payments.length === 1);
  for (let i = 0; i < 20; i++) chain.mine([]);
  await until(marker.id, 'marker Paid', (s) => s.status === 'Paid');
  const after = await state(invoice.id);
  expect(after.status).toBe('Waiting');
  expect(after.payments).toEqual([]);
});

test('USDT sent to a TRX invoice\'s address is another asset: recorded, reported uncredited, never counted', async () => {
  const trx = await createInvoice('TRX', '27.00');
  const token = chain.trc20Transfer(USDT, trx.address, 27_000_000);
  const block = chain.mine([token]);
  confirmTo(block.number, 20);
  const reported = await until(trx.id, 'reported', (s) => s.payments[0]?.reported_as === 'uncredited');
  expect(reported.status).toBe('Waiting');
  expect(reported.amount_received).toBe('0');
  expect(reported.payments).toEqual([expect.objectContaining({ asset: 'USDT', amount: '27', status: 'confirmed' })]);
  expect(reported.events).toEqual(['invoice.late_payment']);
  const [late] = await h.sql<{ payload: Record<string, unknown> }[]>`
    select payload from outbox where payload->>'invoiceId' = ${trx.id} and event_type = 'invoice.late_payment'`;
  // `credited: false` is the field's default: absent from the event's JSON.
  expect(late!.payload).toMatchObject({ currency: 'USDT', amount: '27', network: 'tron', transactionHash: token.txID });
  expect(late!.payload.credited ?? false).toBe(false);
});

test('USDC on Tron, configured here (CHAIN_TRON_USDC_CONTRACT), is watched: a USDC transfer pays a USDC invoice', async () => {
  const invoice = await createInvoice('USDC', '3.00');
  // A USDT transfer of the same amount to it is another asset.
  const block = chain.mine([chain.trc20Transfer(USDC, invoice.address, 3_000_000), chain.trc20Transfer(USDT, invoice.address, 3_000_000)]);
  confirmTo(block.number, 20);
  const paid = await until(invoice.id, 'Paid', (s) => s.status === 'Paid' && s.payments.every((p) => p.reported_as !== null));
  expect(paid.payments.map((p) => [p.asset, p.amount, p.reported_as]).sort()).toEqual([
    ['USDC', '3', 'paid'],
    ['USDT', '3', 'uncredited'],
  ]);
});
