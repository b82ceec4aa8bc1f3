/**
 * What a group-committed batch of creations sends to Postgres (docs/performance.md#group-commit):
 * without an Idempotency-Key, the address indexes and ONE multi-row INSERT, which commits on its
 * own — no BEGIN, no COMMIT (it was four round trips: the indexes, BEGIN, INSERT, COMMIT). With a
 * key, a transaction: the key's claim, the invoices and the stored response commit together.
 * InvoiceWrites on the service's real schema; the statements counted by postgres.js's debug hook (test/support/statements.ts).
 */
import { randomUUID } from 'node:crypto';
import { InvoiceWrites, type InvoiceCreation } from '../src/invoice-writes';
import { sandboxProject, startInvoiceHarness, type Harness } from './support/harness';
import { recordingPool, type StatementRecorder } from '../../../test/support/statements';

let h: Harness;
let recorder: StatementRecorder;
let keyId: number;

beforeAll(async () => {
  h = await startInvoiceHarness();
  recorder = await recordingPool(h.svc.database.url, 'invoice', 2);
  const [key] = await h.sql<{ id: number }[]>`select id from address_keys order by id limit 1`;
  keyId = key!.id;
});
afterAll(async () => {
  await recorder?.end();
  await h?.dispose();
});

function creation(projectId: string, orderId: string, idempotencyKey?: string): InvoiceCreation {
  return {
    key: { keyId, deriver: { addressAt: (index: number) => `tb1qstatements${index}` } },
    idempotency: idempotencyKey === undefined ? undefined : { projectId, key: idempotencyKey, fingerprint: `fp-${orderId}` },
    row: {
      id: randomUUID(),
      projectId,
      environment: 'sandbox',
      projectName: 'Statements',
      orderId,
      orderDescription: null,
      priceAmount: '19.90',
      priceCurrency: 'USD',
      priceAmountInUsd: '19.90',
      payCurrency: 'BTC',
      payNetwork: 'bitcoin',
      rate: '105000',
      rateSources: ['static'],
      rateQuotedAt: null,
      amountExpected: '0.00018953',
      successUrl: 'https://example.com/ok',
      cancelUrl: 'https://example.com/cancel',
      isDonation: false,
      lifetimeMinutes: 60,
      confirmationsRequired: 0,
      paymentTolerancePercent: '0',
    },
  };
}

test('a batch without an Idempotency-Key: the indexes and one INSERT, no transaction; each caller its own invoice', async () => {
  const writes = new InvoiceWrites({ sql: recorder.sql });
  const { projectId } = sandboxProject();
  recorder.reset();
  const created = await Promise.all(Array.from({ length: 5 }, (_, i) => writes.creations.submit(creation(projectId, `stmt-${i}`))));
  expect(created.map((c) => c.invoice.orderId)).toEqual(['stmt-0', 'stmt-1', 'stmt-2', 'stmt-3', 'stmt-4']);
  expect(created.every((c) => !c.replay)).toBe(true);
  expect(new Set(created.map((c) => c.invoice.address)).size).toBe(5);
  expect(recorder.statements).toHaveLength(2);
  expect(recorder.statements[0]).toMatch(/nextval/);
  expect(recorder.statements[1]).toMatch(/insert into invoices/);
  const stored = await h.sql<{ order_id: string; address: string }[]>`select order_id, address from invoices where project_id = ${projectId} order by order_id`;
  expect(stored.map((row) => [row.order_id, row.address])).toEqual(created.map((c) => [c.invoice.orderId, c.invoice.address]));
});

test('a batch with an Idempotency-Key: one transaction around the claim, the invoices and the response; a second call replays', async () => {
  const writes = new InvoiceWrites({ sql: recorder.sql });
  const { projectId } = sandboxProject();
  recorder.reset();
  const [keyed, plain] = await Promise.all([writes.creations.submit(creation(projectId, 'keyed', 'order-keyed')), writes.creations.submit(creation(projectId, 'plain'))]);
  expect(recorder.statements.filter((query) => /^\s*begin/i.test(query))).toHaveLength(1);
  expect(recorder.statements.filter((query) => /^\s*commit/i.test(query))).toHaveLength(1);
  expect([keyed!.replay, plain!.replay]).toEqual([false, false]);
  const again = await writes.creations.submit(creation(projectId, 'keyed', 'order-keyed'));
  expect(again).toMatchObject({ replay: true, invoice: { id: keyed!.invoice.id } });
});
