/**
 * Live Bitcoin payments through the real watcher role and the Esplora adapter, against an Esplora
 * STAND-IN (no Bitcoin node installs here) serving real signed transactions (bitcoinjs-lib):
 * mempool → Confirming at 0 confirmations, Paid at 2 with one invoice.paid; a dropped and
 * double-spent payment → replaced, back to Waiting with invoice.reopened; a 1-block reorg likewise;
 * one transaction paying two invoices credits both; an underpayment then a top-up → Paid.
 */
import { Payer } from './support/esplora-stand-in';
import { SAT, startUtxoHarness, type UtxoHarness } from './support/watcher-harness';

let u: UtxoHarness;

beforeAll(async () => {
  u = await startUtxoHarness('bitcoin');
}, 60_000);

afterAll(async () => {
  await u?.dispose();
});

const liveInvoice = (priceAmount?: string) => u.liveInvoice(priceAmount);
const state = (invoiceId: string) => u.state(invoiceId);
const until = (invoiceId: string, what: string, ok: Parameters<UtxoHarness['until']>[2]) => u.until(invoiceId, what, ok);

let payer: Payer;
beforeEach(() => {
  payer = u.chain.fundedPayer(10_000_000, 3);
});

test('mempool → Confirming at 0 confirmations; mined → Paid at 2 confirmations, with exactly one invoice.paid', async () => {
  const invoice = await liveInvoice();
  const first = await state(invoice.id);
  expect(first.confirmations_required).toBe(2);
  const tx = u.chain.pay(payer, [{ address: invoice.address, value: invoice.sat }]);
  u.chain.broadcast(tx);
  const seen = await until(invoice.id, 'Confirming from the mempool', (s) => s.status === 'Confirming');
  expect(seen.payments).toEqual([expect.objectContaining({ transaction_hash: tx.txid, status: 'seen', confirmations: 0 })]);

  u.chain.mine();
  const one = await until(invoice.id, '1 confirmation', (s) => s.payments[0]?.confirmations === 1);
  expect(one.status).toBe('Confirming');
  u.chain.mine([]);
  const paid = await until(invoice.id, 'Paid', (s) => s.status === 'Paid');
  expect(paid.payments[0]).toMatchObject({ confirmations: 2, status: 'confirmed' });
  // More blocks change nothing: still one invoice.paid.
  u.chain.mine([]);
  await until(invoice.id, '3 confirmations', (s) => s.payments[0]?.confirmations === 3);
  expect(paid.events.filter((e) => e === 'invoice.paid')).toHaveLength(1);
  expect((await state(invoice.id)).events.filter((e) => e === 'invoice.paid')).toHaveLength(1);
});

test('a payment dropped from the mempool and double-spent elsewhere → replaced; the invoice is Waiting again with invoice.reopened', async () => {
  const invoice = await liveInvoice();
  const input = payer.utxos[0]!;
  const payment = u.chain.pay(payer, [{ address: invoice.address, value: invoice.sat }], input);
  u.chain.broadcast(payment);
  await until(invoice.id, 'Confirming', (s) => s.status === 'Confirming');

  u.chain.drop(payment.txid);
  const elsewhere = u.chain.pay(payer, [{ address: new Payer(u.chain.network).payment.address!, value: 5_000_000 }], input);
  u.chain.mine([elsewhere]);
  const back = await until(invoice.id, 'Waiting again', (s) => s.status === 'Waiting');
  expect(back.payments).toEqual([expect.objectContaining({ transaction_hash: payment.txid, status: 'replaced' })]);
  expect(back.events).toContain('invoice.reopened');
  expect(back.events).not.toContain('invoice.paid');
});

test('a 1-block reorg removing a confirmed-but-not-final payment (double-spent in the new block) → back to Waiting with invoice.reopened', async () => {
  const invoice = await liveInvoice();
  const input = payer.utxos[0]!;
  const payment = u.chain.pay(payer, [{ address: invoice.address, value: invoice.sat }], input);
  u.chain.broadcast(payment);
  u.chain.mine();
  await until(invoice.id, '1 confirmation', (s) => s.payments[0]?.confirmations === 1 && s.status === 'Confirming');

  const doubleSpend = u.chain.pay(payer, [{ address: new Payer(u.chain.network).payment.address!, value: 5_000_000 }], input);
  const reorgedAt = u.chain.tip.height;
  u.chain.reorg(1, [doubleSpend]);
  expect(u.chain.tip.height).toBe(reorgedAt);
  const back = await until(invoice.id, 'Waiting after the reorg', (s) => s.status === 'Waiting');
  expect(back.events).toContain('invoice.reopened');
  expect(['orphaned', 'replaced']).toContain(back.payments[0]?.status);
  await until(invoice.id, 'replaced', (s) => s.payments[0]?.status === 'replaced');
  u.chain.mine([]);
  u.chain.mine([]);
  const later = await state(invoice.id);
  expect(later.status).toBe('Waiting');
  expect(later.events).not.toContain('invoice.paid');
});

test('one transaction paying two invoices credits both; an underpayment then a top-up → Paid', async () => {
  const [a, b] = [await liveInvoice('100.00'), await liveInvoice('50.00')];
  const both = u.chain.pay(payer, [{ address: a.address, value: a.sat }, { address: b.address, value: Math.floor(b.sat / 2) }]);
  u.chain.broadcast(both);
  u.chain.mine();
  u.chain.mine([]);
  const paidA = await until(a.id, 'A Paid', (s) => s.status === 'Paid');
  expect(paidA.payments).toEqual([expect.objectContaining({ transaction_hash: both.txid, output_index: 0 })]);
  const partB = await until(b.id, 'B PartiallyPaid', (s) => s.status === 'PartiallyPaid');
  expect(partB.payments).toEqual([expect.objectContaining({ transaction_hash: both.txid, output_index: 1 })]);

  const topUp = u.chain.pay(payer, [{ address: b.address, value: b.sat - Math.floor(b.sat / 2) }]);
  u.chain.broadcast(topUp);
  u.chain.mine();
  u.chain.mine([]);
  const paidB = await until(b.id, 'B Paid', (s) => s.status === 'Paid');
  expect(paidB.payments).toHaveLength(2);
  expect(paidB.amount_received).toBe((b.sat / SAT).toFixed(8).replace(/0+$/, '').replace(/\.$/, ''));
  expect(paidA.events.filter((e) => e === 'invoice.paid')).toHaveLength(1);
  expect(paidB.events.filter((e) => e === 'invoice.paid')).toHaveLength(1);
});

test('a reorg deeper than the confirmation threshold after Paid: nothing reversed (still Paid, no invoice.reopened), counted once as an incident', async () => {
  const incidents = async () => {
    const text = await (await fetch(`${u.watcher.adminUrl}/metrics`)).text();
    return Number(/^watcher_credited_payments_orphaned_total\{chain="bitcoin"\} (\d+)/m.exec(text)?.[1] ?? 0);
  };
  const before = await incidents();
  const invoice = await liveInvoice();
  const input = payer.utxos[0]!;
  const payment = u.chain.pay(payer, [{ address: invoice.address, value: invoice.sat }], input);
  u.chain.mine([payment]);
  u.chain.mine([]);
  await until(invoice.id, 'Paid at 2 confirmations', (s) => s.status === 'Paid');

  // Both blocks replaced; the new first one spends the same coin elsewhere.
  const doubleSpend = u.chain.pay(payer, [{ address: new Payer(u.chain.network).payment.address!, value: 5_000_000 }], input);
  u.chain.reorg(2, [doubleSpend]);
  u.chain.mine([]);
  const after = await until(invoice.id, 'its payment off the chain', (s) => s.payments[0]?.status === 'orphaned' || s.payments[0]?.status === 'replaced');
  expect(after.status).toBe('Paid');
  expect(after.events.filter((e) => e === 'invoice.paid')).toHaveLength(1);
  expect(after.events).not.toContain('invoice.reopened');
  expect(await incidents()).toBe(before + 1);
  // Later blocks settle the invoice again: the incident is not counted twice.
  u.chain.mine([]);
  u.chain.mine([]);
  await new Promise((r) => setTimeout(r, 600));
  expect(await incidents()).toBe(before + 1);
  expect((await state(invoice.id)).status).toBe('Paid');
});
