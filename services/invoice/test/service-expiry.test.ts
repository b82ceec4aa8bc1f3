/**
 * Expiry: the sweeper turns Waiting invoices past expiredAt into Expired and writes one
 * invoice.expired each; an expired invoice (swept or not yet) cannot be paid; two service
 * instances sweeping one database expire every invoice exactly once.
 *
 * Lifetimes are whole minutes, so the tests let time pass honestly by moving an invoice's
 * created_at and expired_at back in SQL rather than by a test-only setting.
 */
import { toJson } from '@bufbuild/protobuf';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import { InvoiceStatus, InvoiceService, type Invoice } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { createRpcClient } from '@coinvoice/runtime';
import { startTestService, type TestService } from '../../../test/support/service';
import { invoiceService } from '../src/server';
import {
  createRequest,
  mapLimit,
  publishedEvents,
  rejection,
  sandboxProject,
  startInvoiceHarness,
  streamEvents,
  waitFor,
  type Harness,
} from './support/harness';

/** Moves invoices `minutes` into the past, as if that much time had gone by since creation. */
async function age(h: Harness, ids: string[], minutes: number): Promise<void> {
  await h.sql`
    update invoices
    set created_at = created_at - make_interval(mins => ${minutes}), expired_at = expired_at - make_interval(mins => ${minutes})
    where id in ${h.sql(ids)}`;
}

async function expiredCount(h: Harness, invoiceId?: string): Promise<number> {
  const [row] = invoiceId
    ? await h.sql<{ n: number }[]>`select count(*)::int as n from outbox where event_type = 'invoice.expired' and event_key = ${invoiceId}`
    : await h.sql<{ n: number }[]>`select count(*)::int as n from outbox where event_type = 'invoice.expired'`;
  return row?.n ?? -1;
}

describe('with the sweeper running (every 100 ms)', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startInvoiceHarness();
  });

  afterAll(async () => {
    await h?.dispose();
  });

  test('an invoice past its lifetime becomes Expired, emits invoice.expired once, and can no longer be paid', async () => {
    const project = sandboxProject();
    const create = (orderId: string) => h.client.createInvoice(createRequest(project, { lifetimeMinutes: 5, orderId, payCurrency: 'LTC' }));
    const doomed = (await create('expiring-order')).invoice!;
    const fresh = (await create('fresh-order')).invoice!;
    await age(h, [doomed.id], 6);

    const expired = await waitFor('the invoice to expire', async () => {
      const { invoice } = await h.client.getInvoice({ projectId: project.projectId, invoiceId: doomed.id });
      return invoice!.status === InvoiceStatus.EXPIRED ? invoice : undefined;
    });
    expect(expired).toMatchObject({ status: InvoiceStatus.EXPIRED, amountReceived: '0' });
    expect(expired.paidAt).toBeUndefined();

    const events = (await publishedEvents(h, 'invoice.expired', 1)).filter((e) => e.payload.invoiceId === doomed.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.payload).toEqual({
      invoiceId: doomed.id,
      projectId: project.projectId,
      orderId: 'expiring-order',
      status: 'Expired',
      currency: 'LTC',
      environment: 'sandbox',
      payNetwork: 'litecoin',
      // Protobuf JSON: "…:46Z" on a whole second, not toISOString's "…:46.000Z".
      expiredAt: toJson(TimestampSchema, expired.expiredAt!),
    });

    expect(await rejection(h.client.payInvoice({ projectId: project.projectId, invoiceId: doomed.id }))).toMatchObject({
      code: 'invoice_not_payable',
      message: 'invoice is Expired; only a Waiting invoice can be paid',
    });

    // Later sweeps leave it alone; the fresh invoice is untouched.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await expiredCount(h, doomed.id)).toBe(1);
    expect((await h.client.getInvoice({ projectId: project.projectId, invoiceId: fresh.id })).invoice!.status).toBe(InvoiceStatus.WAITING);
    expect(await expiredCount(h, fresh.id)).toBe(0);
  });

  test('a Paid invoice never expires', async () => {
    const project = sandboxProject();
    const invoice = (await h.client.createInvoice(createRequest(project, { lifetimeMinutes: 5 }))).invoice!;
    await h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id });
    await age(h, [invoice.id], 10);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect((await h.client.getInvoice({ projectId: project.projectId, invoiceId: invoice.id })).invoice!.status).toBe(InvoiceStatus.PAID);
    expect(await expiredCount(h, invoice.id)).toBe(0);
  });
});

test('an invoice past expiredAt that the sweeper has not reached yet is not payable, and reads Expired (invoice, checkout, the list and its filter) as payment refuses it', async () => {
  const h = await startInvoiceHarness({ env: { INVOICE_SWEEP_INTERVAL_MS: '3600000' } });
  try {
    const project = sandboxProject();
    const invoice = (await h.client.createInvoice(createRequest(project, { lifetimeMinutes: 1 }))).invoice!;
    await age(h, [invoice.id], 2);
    const err = await rejection(h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id }));
    expect(err).toMatchObject({ code: 'invoice_not_payable', message: expect.stringMatching(/^invoice expired at .*; it can no longer be paid$/) });
    // Still Waiting in the database (not swept, no invoice.expired yet), but every read says what
    // payment says: it is over.
    expect(await h.sql`select status from invoices where id = ${invoice.id}`).toEqual([{ status: 'Waiting' }]);
    expect(await expiredCount(h, invoice.id)).toBe(0);
    expect((await h.client.getInvoice({ projectId: project.projectId, invoiceId: invoice.id })).invoice!.status).toBe(InvoiceStatus.EXPIRED);
    expect((await h.client.getCheckout({ invoiceId: invoice.id })).checkout!.status).toBe(InvoiceStatus.EXPIRED);
    // One not yet past expiredAt reads Waiting.
    const fresh = (await h.client.createInvoice(createRequest(project, { lifetimeMinutes: 1 }))).invoice!;
    expect((await h.client.getInvoice({ projectId: project.projectId, invoiceId: fresh.id })).invoice!.status).toBe(InvoiceStatus.WAITING);
    const [paid] = await h.sql<{ n: number }[]>`select count(*)::int as n from outbox where event_type = 'invoice.paid'`;
    expect(paid?.n).toBe(0);
    // The project's list (the dashboard's) shows and filters by the same status as GET.
    const listed = async (status?: InvoiceStatus) =>
      (await h.client.listInvoices({ projectId: project.projectId, pageSize: 50, ...(status === undefined ? {} : { status }) })).invoices.map((i) => [i.id, i.status]);
    expect(await listed()).toEqual([
      [fresh.id, InvoiceStatus.WAITING],
      [invoice.id, InvoiceStatus.EXPIRED],
    ]);
    expect(await listed(InvoiceStatus.EXPIRED)).toEqual([[invoice.id, InvoiceStatus.EXPIRED]]);
    expect(await listed(InvoiceStatus.WAITING)).toEqual([[fresh.id, InvoiceStatus.WAITING]]);
  } finally {
    await h.dispose();
  }
});

test('two service instances sweeping one database expire each invoice exactly once', async () => {
  const sweeperEnv = { INVOICE_SWEEP_INTERVAL_MS: '50', INVOICE_SWEEP_BATCH_SIZE: '5' };
  const h = await startInvoiceHarness({ env: sweeperEnv });
  let second: TestService | undefined;
  try {
    second = await startTestService(invoiceService, { database: h.svc.database, namespace: h.svc.namespace, env: { ...sweeperEnv } });
    const secondClient = createRpcClient(InvoiceService, second.url);
    const project = sandboxProject();
    const invoices: Invoice[] = await mapLimit(Array.from({ length: 200 }, (_, i) => i), 20, async (i) => {
      const client = i % 2 === 0 ? h.client : secondClient;
      return (await client.createInvoice(createRequest(project, { lifetimeMinutes: 5 }))).invoice!;
    });
    const ids = invoices.map((i) => i.id);
    await age(h, ids, 6);

    await waitFor('every invoice to expire', async () => {
      const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from invoices where status = 'Expired' and id in ${h.sql(ids)}`;
      return row?.n === ids.length;
    });
    // One outbox row per invoice…
    const rows = await h.sql<{ event_key: string }[]>`select event_key from outbox where event_type = 'invoice.expired'`;
    expect(rows.map((r) => r.event_key).sort()).toEqual([...ids].sort());
    // …and exactly one invoice.expired per invoice on JetStream.
    const events = await publishedEvents(h, 'invoice.expired', ids.length);
    expect(events.map((e) => e.payload.invoiceId).sort()).toEqual([...ids].sort());
    expect((await streamEvents(h.nats, h.svc.namespace)).filter((e) => e.type === 'invoice.expired')).toHaveLength(ids.length);

    // Both instances expired some (their metrics add up to the total).
    const counted = await Promise.all(
      [h.svc.adminUrl, second.adminUrl].map(async (admin) => {
        const text = await (await fetch(`${admin}/metrics`)).text();
        return Number(/^invoice_expired_total (\d+)/m.exec(text)?.[1] ?? 0);
      }),
    );
    expect(counted[0]! + counted[1]!).toBe(ids.length);
    expect(Math.min(...counted)).toBeGreaterThan(0);
  } finally {
    await second?.stop();
    await h.dispose();
  }
});
