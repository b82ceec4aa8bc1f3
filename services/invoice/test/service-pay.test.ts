/**
 * PayInvoice (sandbox pay, dashboard Simulate) over gRPC against real Postgres and NATS: exactly
 * one of 50 concurrent calls wins and exactly one invoice.paid reaches JetStream; live invoices,
 * paid invoices and other projects' invoices are refused with their codes.
 */
import { randomUUID } from 'node:crypto';
import { toJson } from '@bufbuild/protobuf';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import { Code, errorFacts } from '@coinvoice/runtime';
import { InvoiceStatus, type Invoice } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import {
  createRequest,
  liveProject,
  publishedEvents,
  rejection,
  sandboxProject,
  startInvoiceHarness,
  type Harness,
} from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startInvoiceHarness();
});

afterAll(async () => {
  await h?.dispose();
});

async function createInvoice(...args: Parameters<typeof createRequest>): Promise<Invoice> {
  return (await h.client.createInvoice(createRequest(...args))).invoice!;
}

test('50 concurrent pay calls: exactly one succeeds, the rest invoice_not_payable, exactly one invoice.paid on JetStream', async () => {
  const project = sandboxProject();
  const invoice = await createInvoice(project, { priceAmount: '35.00', payCurrency: 'ETH', orderId: 'race-order-1' });

  const outcomes = await Promise.allSettled(
    Array.from({ length: 50 }, () => h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id })),
  );
  const ok = outcomes.filter((o) => o.status === 'fulfilled');
  const failed = outcomes.flatMap((o) => (o.status === 'rejected' ? [errorFacts(o.reason)] : []));
  expect(ok).toHaveLength(1);
  expect(failed).toHaveLength(49);
  for (const err of failed) expect(err).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'invoice_not_payable' });

  const paid = (ok[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof h.client.payInvoice>>>).value.invoice!;
  expect(paid).toMatchObject({ id: invoice.id, status: InvoiceStatus.PAID, amountReceived: invoice.amountExpected });
  expect(paid.transactionHash).toMatch(/^[0-9a-f]{64}$/);
  expect(paid.paidAt).toBeDefined();

  // The outbox holds one row, and once relayed the stream holds exactly one invoice.paid for it.
  const [outbox] = await h.sql<{ n: number }[]>`
    select count(*)::int as n from outbox where event_type = 'invoice.paid' and event_key = ${invoice.id}`;
  expect(outbox?.n).toBe(1);
  const events = (await publishedEvents(h, 'invoice.paid', 1)).filter((e) => e.payload.invoiceId === invoice.id);
  expect(events).toHaveLength(1);
  expect(events[0]!.subject).toBe(`${h.svc.namespace}.invoice.paid`);
  expect(events[0]!.payload).toEqual({
    invoiceId: invoice.id,
    projectId: project.projectId,
    orderId: 'race-order-1',
    status: 'Paid',
    amount: invoice.amountExpected,
    currency: 'ETH',
    environment: 'sandbox',
    payNetwork: 'ethereum',
    transactionHash: paid.transactionHash,
    // Protobuf JSON: "…:46Z" on a whole second, not toISOString's "…:46.000Z".
    paidAt: toJson(TimestampSchema, paid.paidAt!),
  });

  // Get shows the same Paid invoice.
  expect((await h.client.getInvoice({ projectId: project.projectId, invoiceId: invoice.id })).invoice).toEqual(paid);
});

test('the supplied amountReceived and transactionHash are used, and carried by invoice.paid', async () => {
  const project = sandboxProject();
  const invoice = await createInvoice(project, { payCurrency: 'BTC', orderId: undefined });
  const hash = `0x${'ab'.repeat(32)}`;
  const { invoice: paid } = await h.client.payInvoice({
    projectId: project.projectId,
    invoiceId: invoice.id,
    amountReceived: '0.00012345',
    transactionHash: hash,
  });
  expect(paid).toMatchObject({ status: InvoiceStatus.PAID, amountReceived: '0.00012345', transactionHash: hash });
  const [event] = (await publishedEvents(h, 'invoice.paid', 2)).filter((e) => e.payload.invoiceId === invoice.id);
  expect(event?.payload).toMatchObject({ amount: '0.00012345', currency: 'BTC', status: 'Paid', environment: 'sandbox', transactionHash: hash });
  expect(event?.payload).not.toHaveProperty('orderId'); // absent when the invoice has none
});

test('a live invoice is refused with sandbox_key_required and stays Waiting', async () => {
  const project = liveProject();
  const invoice = await createInvoice(project);
  expect(await rejection(h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id }))).toMatchObject({
    connectCode: Code.PermissionDenied,
    code: 'sandbox_key_required',
  });
  expect((await h.client.getInvoice({ projectId: project.projectId, invoiceId: invoice.id })).invoice!.status).toBe(InvoiceStatus.WAITING);
  const [outbox] = await h.sql<{ n: number }[]>`select count(*)::int as n from outbox where event_type = 'invoice.paid' and event_key = ${invoice.id}`;
  expect(outbox?.n).toBe(0);
});

test("another project's invoice answers not_found; paying twice answers invoice_not_payable", async () => {
  const project = sandboxProject();
  const invoice = await createInvoice(project);
  expect(await rejection(h.client.payInvoice({ projectId: randomUUID(), invoiceId: invoice.id }))).toMatchObject({ code: 'not_found' });
  await h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id });
  expect(await rejection(h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id }))).toMatchObject({
    connectCode: Code.FailedPrecondition,
    code: 'invoice_not_payable',
    message: 'invoice is Paid; only a Waiting invoice can be paid',
  });
});

test.each([
  ['0', 'BTC', 'must be greater than 0'],
  ['-1', 'BTC', 'must be greater than 0'],
  ['0.123456789', 'BTC', 'must have at most 8 decimal places'],
  ['1e-3', 'BTC', /plain decimal/],
  ['1.1234567', 'USDT', 'must have at most 6 decimal places for USDT'],
])('amountReceived %s for %s is refused (validation_failed) and the invoice stays payable', async (amountReceived, coin, message) => {
  const project = sandboxProject();
  const invoice = await createInvoice(project, { payCurrency: coin });
  const err = await rejection(h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id, amountReceived }));
  expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed', violations: [{ field: 'amountReceived', message }] });
  expect((await h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id })).invoice!.status).toBe(InvoiceStatus.PAID);
});

test('a transactionHash over 128 characters is refused', async () => {
  const project = sandboxProject();
  const invoice = await createInvoice(project);
  const err = await rejection(
    h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id, transactionHash: 'f'.repeat(129) }),
  );
  expect(err).toMatchObject({ code: 'validation_failed', violations: [{ field: 'transactionHash', message: 'must be at most 128 characters' }] });
});
