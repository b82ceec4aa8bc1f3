/**
 * CreateInvoice's idempotency key (docs/architecture.md#idempotency-keys): per project, kept 24 h; the same key and body
 * replay the first response without a second invoice, also when the duplicates race; another
 * body is refused with idempotency_key_reused (HTTP 422 by code).
 */
import { randomUUID } from 'node:crypto';
import { Code, errorFacts, httpStatusOf } from '@coinvoice/runtime';
import { InvoiceStatus } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { createRequest, rejection, sandboxProject, startInvoiceHarness, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startInvoiceHarness();
});

afterAll(async () => {
  await h?.dispose();
});

async function invoiceCount(projectId: string): Promise<number> {
  const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from invoices where project_id = ${projectId}`;
  return row?.n ?? -1;
}

test('the same key and body replay the first response, even after the invoice was paid; no second invoice', async () => {
  const project = sandboxProject();
  const request = createRequest(project, { idempotencyKey: 'order-1001-attempt', orderId: 'order-1001' });
  const first = await h.client.createInvoice(request);
  expect(first.idempotentReplay).toBe(false);

  const again = await h.client.createInvoice(request);
  expect(again.idempotentReplay).toBe(true);
  expect(again.invoice).toEqual(first.invoice);

  // The replay is the FIRST response, as it was: a later payment does not change it.
  await h.client.payInvoice({ projectId: project.projectId, invoiceId: first.invoice!.id });
  const afterPay = await h.client.createInvoice(request);
  expect(afterPay).toMatchObject({ idempotentReplay: true, invoice: { id: first.invoice!.id, status: InvoiceStatus.WAITING } });

  expect(await invoiceCount(project.projectId)).toBe(1);
});

test('a different body with the same key answers idempotency_key_reused (422); nothing is created', async () => {
  const project = sandboxProject();
  await h.client.createInvoice(createRequest(project, { idempotencyKey: 'k-1', priceAmount: '10.00', orderId: 'o' }));
  const err = await rejection(h.client.createInvoice(createRequest(project, { idempotencyKey: 'k-1', priceAmount: '10.01', orderId: 'o' })));
  expect(err).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'idempotency_key_reused' });
  expect(httpStatusOf(err.connectCode, err.code)).toBe(422);
  expect(await invoiceCount(project.projectId)).toBe(1);
});

test('keys are per project: another project may use the same key for its own invoice', async () => {
  const a = sandboxProject();
  const b = sandboxProject();
  const first = await h.client.createInvoice(createRequest(a, { idempotencyKey: 'shared-key', orderId: 'x' }));
  const second = await h.client.createInvoice(createRequest(b, { idempotencyKey: 'shared-key', orderId: 'x' }));
  expect(second.idempotentReplay).toBe(false);
  expect(second.invoice!.id).not.toBe(first.invoice!.id);
  expect(second.invoice!.projectId).toBe(b.projectId);
});

test('what the gateway adds (project name, lifetime) is not part of the body', async () => {
  const project = sandboxProject();
  const first = await h.client.createInvoice(createRequest(project, { idempotencyKey: 'k-gw', orderId: 'y', lifetimeMinutes: 30 }));
  const again = await h.client.createInvoice(
    createRequest({ ...project, projectName: 'Renamed Shop' }, { idempotencyKey: 'k-gw', orderId: 'y', lifetimeMinutes: 45 }),
  );
  expect(again).toMatchObject({ idempotentReplay: true, invoice: { id: first.invoice!.id, projectName: first.invoice!.projectName } });
});

test('20 concurrent duplicates create exactly one invoice; every caller gets it', async () => {
  const project = sandboxProject();
  const request = createRequest(project, { idempotencyKey: `race-${randomUUID()}`, orderId: 'race' });
  const results = await Promise.all(Array.from({ length: 20 }, () => h.client.createInvoice(request)));
  expect(new Set(results.map((r) => r.invoice!.id)).size).toBe(1);
  expect(results.filter((r) => !r.idempotentReplay)).toHaveLength(1);
  expect(await invoiceCount(project.projectId)).toBe(1);
});

test('concurrent requests with one key and different bodies: one invoice, the others refused', async () => {
  const project = sandboxProject();
  const outcomes = await Promise.allSettled(
    ['1.00', '2.00', '3.00', '4.00', '5.00'].map((priceAmount) =>
      h.client.createInvoice(createRequest(project, { idempotencyKey: 'contested', priceAmount, orderId: 'z' })),
    ),
  );
  expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
  for (const o of outcomes) if (o.status === 'rejected') expect(errorFacts(o.reason).code).toBe('idempotency_key_reused');
  expect(await invoiceCount(project.projectId)).toBe(1);
});

test('a key past its 24 h retention is free again and a new invoice is created', async () => {
  const project = sandboxProject();
  const request = createRequest(project, { idempotencyKey: 'old-key', orderId: 'old' });
  const first = await h.client.createInvoice(request);
  await h.sql`update idempotency_keys set expires_at = now() - interval '1 second' where project_id = ${project.projectId}`;
  const second = await h.client.createInvoice(request);
  expect(second.idempotentReplay).toBe(false);
  expect(second.invoice!.id).not.toBe(first.invoice!.id);
  expect(await h.client.createInvoice(request)).toMatchObject({ idempotentReplay: true, invoice: { id: second.invoice!.id } });
});

test('a request refused as invalid does not use up its key', async () => {
  const project = sandboxProject();
  const bad = await rejection(h.client.createInvoice(createRequest(project, { idempotencyKey: 'fix-me', priceAmount: '-1' })));
  expect(bad.code).toBe('validation_failed');
  const good = await h.client.createInvoice(createRequest(project, { idempotencyKey: 'fix-me', priceAmount: '1.00' }));
  expect(good.idempotentReplay).toBe(false);
});
