/**
 * The batched statements find their rows by key, whatever else the table holds
 * (docs/performance.md#plans). A multi-row UPDATE joined to a record set (`jsonb_to_recordset`) is
 * planned as a hash join over a scan of the table unless the statement also names the keys as an
 * index condition: then one batch of payments read every open invoice, and one batch of
 * Idempotency-Key responses the whole key table. Counted here with the transaction's own table
 * statistics (pg_stat_xact_user_tables): rows read by scans and fetched through indexes.
 */
import { randomUUID } from 'node:crypto';
import type { TransactionSql } from '@coinvoice/runtime';
import { markPaidMany } from '../src/store/invoices';
import { invoiceIdempotencyKeys } from '../src/store/idempotency';
import { createRequest, sandboxProject, startInvoiceHarness, type Harness } from './support/harness';
import { copyOpenInvoices } from './support/open-invoices';

const OTHER_OPEN_INVOICES = 3_000;

let h: Harness;
let template: string;

beforeAll(async () => {
  h = await startInvoiceHarness();
  const project = sandboxProject('Busy Shop');
  template = (await h.client.createInvoice(createRequest(project))).invoice!.id;
  await copyOpenInvoices(h.sql, template, Array.from({ length: OTHER_OPEN_INVOICES }, (_, i) => `plan-test-${i}-${randomUUID()}`));
  // One key per copied invoice: a day of keyed requests, in miniature.
  await h.sql`
    insert into idempotency_keys (project_id, key, request_hash, invoice_id, expires_at)
    select project_id, 'bulk-' || address_index, 'hash', id, now() + interval '1 day' from invoices where address like 'plan-test-%'`;
  // Statistics as autovacuum would leave them: the planner knows how large both tables are.
  await h.sql`analyze invoices`;
  await h.sql`analyze idempotency_keys`;
});

afterAll(async () => {
  await h?.dispose();
});

/** Rows of `table` this transaction has read by sequential scans and fetched through indexes so far. */
async function rowsTouched(tx: TransactionSql, table: string): Promise<number> {
  const [row] = await tx<{ n: string }[]>`
    select coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) as n from pg_stat_xact_user_tables
    where schemaname = current_schema() and relname = ${table}`;
  return Number(row?.n ?? 0);
}

test(`paying 3 invoices reads those 3, not the ${OTHER_OPEN_INVOICES.toLocaleString('en')} other open invoices`, async () => {
  const project = sandboxProject();
  const ids = await Promise.all([1, 2, 3].map(async () => (await h.client.createInvoice(createRequest(project))).invoice!.id));
  const { paid, touched } = await h.sql.begin(async (tx) => {
    const before = await rowsTouched(tx, 'invoices');
    const paid = await markPaidMany(tx, ids.map((invoiceId, i) => ({ invoiceId, amountReceived: '0.0003', transactionHash: `0xplan${i}` })));
    return { paid, touched: (await rowsTouched(tx, 'invoices')) - before };
  });
  expect([...paid.keys()].sort()).toEqual([...ids].sort());
  expect(touched).toBeLessThan(50);
});

test(`storing 3 Idempotency-Key responses reads those 3 keys, not the ${OTHER_OPEN_INVOICES.toLocaleString('en')} others`, async () => {
  const [copy] = await h.sql<{ project_id: string; address_index: number }[]>`
    select project_id, address_index from invoices where address like 'plan-test-%' order by address_index limit 1`;
  const keys = [0, 1, 2].map((i) => `bulk-${copy!.address_index + i}`);
  const touched = await h.sql.begin(async (tx) => {
    const before = await rowsTouched(tx, 'idempotency_keys');
    await invoiceIdempotencyKeys.saveResponses(tx, keys.map((key) => ({ projectId: copy!.project_id, key, response: new Uint8Array([1, 2, 3]) })));
    return (await rowsTouched(tx, 'idempotency_keys')) - before;
  });
  const stored = await h.sql<{ key: string; response: Buffer }[]>`
    select key, response from idempotency_keys where project_id = ${copy!.project_id} and response is not null order by key`;
  expect(stored.map((r) => [r.key, [...r.response]])).toEqual(keys.sort().map((key) => [key, [1, 2, 3]]));
  expect(touched).toBeLessThan(50);
});
