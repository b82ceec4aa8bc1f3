/**
 * invoice.late_payment over real NATS and Postgres: a credited late payment lands in the live
 * balance once per payment id, whatever number of events (and event ids) report it; a payment of
 * another asset (`credited: false`) and anything sandbox credit nothing; it adds to what
 * invoice.paid credited for the same invoice.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson } from '@bufbuild/protobuf';
import { InvoiceLatePaymentSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { waitFor } from '../../../test/support/async';
import { balanceOf, startPayoutHarness, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness();
});

afterAll(async () => {
  await h?.dispose();
});

async function publishLatePayment(late: {
  invoiceId: string;
  projectId: string;
  environment: string;
  currency: string;
  amount: string;
  paymentId: string;
  credited: boolean;
}): Promise<string> {
  const id = randomUUID();
  const message = create(InvoiceLatePaymentSchema, { ...late, status: 'Expired', transactionHash: late.paymentId.split(':')[1] ?? '0x' });
  await h.publishEvent({ id, type: 'invoice.late_payment', payload: toJson(InvoiceLatePaymentSchema, message), key: late.invoiceId });
  await waitFor(`late payment ${id} processed`, async () => {
    const rows = await h.sql`select 1 from processed_events where consumer_name = 'payout-ledger-late' and event_id = ${id}`;
    return rows.length === 1 || undefined;
  });
  return id;
}

test('a late payment credits the live balance once per payment, on top of invoice.paid', async () => {
  const project = h.auth.addProject('live');
  const invoiceId = await h.credit(project, 'ETH', '1');
  const late = { invoiceId, projectId: project.id, environment: 'live', currency: 'ETH', amount: '0.25', paymentId: 'ethereum:0xaa:-1', credited: true };
  await publishLatePayment(late);
  await publishLatePayment(late); // the same payment reported again under a new event id
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '1.25', pending: '0', total: '1.25' });
  const entries = await h.sql`select kind, payment_id from ledger_entries where invoice_id = ${invoiceId} order by id`;
  expect(entries.map((e) => [e.kind, e.payment_id])).toEqual([
    ['credit_invoice', null],
    ['credit_late_payment', 'ethereum:0xaa:-1'],
  ]);
  // Another payment of the same invoice is another credit.
  await publishLatePayment({ ...late, amount: '0.5', paymentId: 'ethereum:0xbb:-1' });
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '1.75', pending: '0', total: '1.75' });
});

test('another asset (credited: false) and sandbox events credit nothing', async () => {
  const project = h.auth.addProject('live');
  const invoiceId = randomUUID();
  await publishLatePayment({ invoiceId, projectId: project.id, environment: 'live', currency: 'USDC', amount: '10', paymentId: 'ethereum:0xcc:3', credited: false });
  await publishLatePayment({ invoiceId, projectId: project.id, environment: 'sandbox', currency: 'USDT', amount: '10', paymentId: 'ethereum:0xdd:3', credited: true });
  expect(await h.sql`select 1 from ledger_entries where invoice_id = ${invoiceId}`).toHaveLength(0);
  expect(await balanceOf(h, project, 'USDC')).toEqual({ available: '0', pending: '0', total: '0' });
});
