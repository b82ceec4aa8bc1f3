/**
 * The batched statements find their rows by key, whatever else the table holds
 * (docs/performance.md#plans). A multi-row UPDATE joined to a record set (`jsonb_to_recordset`) is
 * planned as a hash join over a scan of the table unless the statement also names the keys as an
 * index condition: then one batch of payments read every open invoice, and one batch of
 * Idempotency-Key responses the whole key table; and with a year of expired invoices beside them the
 * planner took the open invoices' expiry index (it believes few rows expire after now()) and read
 * every open invoice again. Counted here with the transaction's own statistics: rows read by
 * sequential scans and index entries read through any index of the table.
 */
import { randomUUID } from 'node:crypto';
import { markPaidMany } from '../src/store/invoices';
import { invoiceIdempotencyKeys } from '../src/store/idempotency';
import { createRequest, sandboxProject, startInvoiceHarness, type Harness } from './support/harness';
import { copyOpenInvoices } from './support/open-invoices';
import { rowsTouched } from '../../../test/support/plans';

const OTHER_OPEN_INVOICES = 3_000;
/** Expired invoices of the past year: next to them the open ones are few and all expire later. */
const HISTORY = 300_000;

let h: Harness;
let template: string;

beforeAll(async () => {
  h = await startInvoiceHarness();
  const project = sandboxProject('Busy Shop');
  template = (await h.client.createInvoice(createRequest(project))).invoice!.id;
  await copyOpenInvoices(h.sql, template, Array.from({ length: OTHER_OPEN_INVOICES }, (_, i) => `plan-test-${i}-${randomUUID()}`));
  // A year of expired invoices: with them the planner believes few rows expire after now() (the
  // open ones are a sliver of the table) and is tempted by the open invoices' expiry index.
  await h.sql`
    insert into invoices (id, project_id, environment, project_name, price_amount, price_currency, price_amount_in_usd,
                          pay_currency, pay_network, rate, amount_expected, status, address, key_id, address_index,
                          success_url, cancel_url, created_at, expired_at)
    select gen_random_uuid(), i.project_id, i.environment, i.project_name, i.price_amount, i.price_currency, i.price_amount_in_usd,
           i.pay_currency, i.pay_network, i.rate, i.amount_expected, 'Expired', 'plan-history-' || g, i.key_id, 2000000000 - g,
           i.success_url, i.cancel_url, now() - interval '1 year' + g * interval '100 seconds', now() - interval '1 year' + g * interval '100 seconds' + interval '1 hour'
    from invoices i, generate_series(1, ${HISTORY}) g where i.id = ${template}`;
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

test(`paying 3 invoices reads those 3, not the ${OTHER_OPEN_INVOICES.toLocaleString('en')} other open invoices (nor the ${HISTORY.toLocaleString('en')} expired)`, async () => {
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
