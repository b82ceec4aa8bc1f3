/**
 * Group commit (docs/performance.md#group-commit): concurrent CreateInvoice, PayInvoice and
 * GetInvoice calls share batches — one transaction, multi-row statements — and each is answered
 * as if it had come alone: its own invoice, its own address, its own error. A row that makes the
 * batch's statement fail fails only its own call.
 */
import { Code } from '@coinvoice/runtime';
import { InvoiceStatus } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { createRequest, rejection, sandboxProject, startInvoiceHarness, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startInvoiceHarness();
});

afterAll(async () => {
  await h?.dispose();
});

async function metric(name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${h.svc.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

test('64 concurrent creations: each its own invoice and address, committed in shared transactions', async () => {
  const project = sandboxProject();
  const results = await Promise.all(Array.from({ length: 64 }, (_, i) => h.client.createInvoice(createRequest(project, { orderId: `batch-${i}` }))));
  const invoices = results.map((r) => r.invoice!);
  expect(invoices.map((i) => i.orderId)).toEqual(Array.from({ length: 64 }, (_, i) => `batch-${i}`));
  expect(new Set(invoices.map((i) => i.id)).size).toBe(64);
  expect(new Set(invoices.map((i) => i.address)).size).toBe(64);
  const rows = await h.sql<{ id: string; order_id: string; address_index: number; created_at: Date }[]>`
    select id, order_id, address_index, created_at from invoices where project_id = ${project.projectId}`;
  expect(rows).toHaveLength(64);
  expect(new Set(rows.map((r) => r.address_index)).size).toBe(64);
  // One transaction's now(): invoices of one batch share their created_at to the microsecond.
  const perTransaction = new Map<number, number>();
  for (const row of rows) perTransaction.set(row.created_at.getTime(), (perTransaction.get(row.created_at.getTime()) ?? 0) + 1);
  expect(Math.max(...perTransaction.values())).toBeGreaterThan(1);
  expect(await metric('invoice_batch_size_count', 'kind="create"')).toBeGreaterThan(0);
});

test('a batch with one row the database refuses: the others are answered with their invoices, the bad one with its own error', async () => {
  // A constraint only this test's rows can break: the batch's multi-row INSERT fails as a whole.
  await h.sql`alter table invoices add constraint test_refuses_poison check (order_id is distinct from 'poison')`;
  try {
    const project = sandboxProject();
    const retriedBefore = await metric('invoice_batches_retried_alone_total', 'kind="create"');
    // A first call keeps a batch running so the next twelve gather into one batch behind it.
    const orders = ['lead', 'good-1', 'good-2', 'good-3', 'good-4', 'good-5', 'poison', 'good-6', 'good-7', 'good-8', 'good-9', 'good-10', 'good-11'];
    const settled = await Promise.allSettled(orders.map((orderId) => h.client.createInvoice(createRequest(project, { orderId }))));
    const byOrder = new Map(orders.map((orderId, i) => [orderId, settled[i]!]));
    for (const [orderId, outcome] of byOrder) {
      if (orderId === 'poison') continue;
      expect(outcome.status).toBe('fulfilled');
      const invoice = (outcome as PromiseFulfilledResult<Awaited<ReturnType<typeof h.client.createInvoice>>>).value.invoice!;
      expect(invoice).toMatchObject({ orderId, status: InvoiceStatus.WAITING });
    }
    const poisoned = await rejection(h.client.createInvoice(createRequest(project, { orderId: 'poison' })));
    expect(poisoned.connectCode).toBe(Code.Internal);
    expect(byOrder.get('poison')!.status).toBe('rejected');
    const stored = await h.sql<{ order_id: string }[]>`select order_id from invoices where project_id = ${project.projectId} order by order_id`;
    expect(stored.map((r) => r.order_id)).toEqual(orders.filter((o) => o !== 'poison').sort());
    // The poison shared a batch with others at least once (then each was tried alone).
    expect(await metric('invoice_batches_retried_alone_total', 'kind="create"')).toBeGreaterThan(retriedBefore);
  } finally {
    await h.sql`alter table invoices drop constraint test_refuses_poison`;
  }
});

test('concurrent payments and reads in batches: each payer its own answer, a second payer of one invoice its own refusal', async () => {
  const project = sandboxProject();
  const other = sandboxProject('Other Shop');
  const created = await Promise.all(Array.from({ length: 20 }, () => h.client.createInvoice(createRequest(project))));
  const ids = created.map((c) => c.invoice!.id);
  const foreign = (await h.client.createInvoice(createRequest(other))).invoice!;
  const calls = [
    ...ids.map((invoiceId) => h.client.payInvoice({ projectId: project.projectId, invoiceId })),
    h.client.payInvoice({ projectId: project.projectId, invoiceId: ids[0]! }),
    h.client.payInvoice({ projectId: project.projectId, invoiceId: foreign.id }),
  ];
  const settled = await Promise.allSettled(calls);
  const paid = settled.slice(0, 20).concat(settled[20]!).filter((s) => s.status === 'fulfilled');
  // ids[0] was paid by exactly one of its two payers; the other was refused as not payable.
  expect(paid).toHaveLength(20);
  const refusedTwice = [settled[0]!, settled[20]!].find((s) => s.status === 'rejected') as PromiseRejectedResult;
  expect(refusedTwice.reason).toMatchObject({ code: Code.FailedPrecondition });
  // Another project's invoice is as absent as a missing one.
  expect((settled[21] as PromiseRejectedResult).reason).toMatchObject({ code: Code.NotFound });
  const reads = await Promise.all([...ids, foreign.id].map((invoiceId) => h.client.getInvoice({ projectId: project.projectId, invoiceId }).then((r) => r.invoice!, (err: unknown) => err)));
  expect(reads.slice(0, 20).map((i) => (i as { status: InvoiceStatus }).status)).toEqual(Array(20).fill(InvoiceStatus.PAID));
  expect(reads[20]).toMatchObject({ code: Code.NotFound });
});
