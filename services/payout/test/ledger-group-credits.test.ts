/**
 * The ledger consumer's group of invoice.paid (docs/performance.md#events): sandbox credits of a
 * group go in ONE multi-row statement — their entries, each balance raised once by what went in —
 * inside the group's transaction (it was a statement per event); a live credit keeps its own, with
 * its auto-sweep check. Duplicates credit nothing, within the group or across groups. The handler
 * on the service's real schema; statements counted by postgres.js's debug hook (test/support/statements.ts); money compared to
 * the base unit.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { createLogger, eventTransaction, type ConsumedEvent } from '@coinvoice/runtime';
import { InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { ledgerGroupHandler, type InvoiceCredit } from '../src/events/ledger-consumer';
import { balanceOf, ledgerSums, startPayoutHarness, type Harness } from './support/harness';
import { recordingPool, type StatementRecorder } from '../../../test/support/statements';

let h: Harness;
let recorder: StatementRecorder;

beforeAll(async () => {
  h = await startPayoutHarness();
  recorder = await recordingPool(h.svc.database.url, 'payout');
}, 120_000);

afterAll(async () => {
  await recorder?.end();
  await h?.dispose();
});

function paid(projectId: string, fields: { invoiceId?: string; amount: string; currency?: string; environment?: 'live' | 'sandbox' }): ConsumedEvent {
  const payload = toJson(
    InvoicePaidSchema,
    create(InvoicePaidSchema, {
      invoiceId: fields.invoiceId ?? randomUUID(),
      projectId,
      status: 'Paid',
      amount: fields.amount,
      currency: fields.currency ?? 'BTC',
      environment: fields.environment ?? 'sandbox',
      transactionHash: 'ab'.repeat(32),
      paidAt: timestampFromDate(new Date()),
    }),
  );
  return { id: randomUUID(), type: 'invoice.paid', subject: 'test.invoice.paid', payload, deliveryCount: 1, streamSequence: 1 };
}

async function applyGroup(events: ConsumedEvent[], told: InvoiceCredit[] = []): Promise<void> {
  const handle = ledgerGroupHandler({ logger: createLogger({ service: 'test', level: 'silent' }), onCredited: (credit) => told.push(credit) });
  await eventTransaction(recorder.sql, (tx) => handle(tx, events));
}

test('twelve sandbox credits of a group: one statement between BEGIN and COMMIT; each credited once, the balance their exact sum', async () => {
  const project = h.auth.addProject('sandbox');
  const amounts = ['0.00000001', '0.12345678', '1', '0.5', '2.00000009', '0.00000003', '7.1', '0.00100000', '3', '0.2', '0.09999999', '11'];
  const events = amounts.map((amount) => paid(project.id, { amount }));
  const told: InvoiceCredit[] = [];
  recorder.reset();
  await applyGroup(events, told);
  expect(recorder.statements).toHaveLength(3);
  expect(recorder.statements[0]).toMatch(/^\s*begin/i);
  expect(recorder.statements[1]).toMatch(/insert into ledger_entries/);
  expect(recorder.statements[2]).toMatch(/^\s*commit/i);
  expect(told.map((credit) => credit.amount)).toEqual(amounts.map((amount) => (amount === '0.00100000' ? '0.001' : amount)));
  // 25.0244569 BTC: 2,502,445,690 satoshis, every one of them.
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '25.0244569', pending: '0', total: '25.0244569' });
  expect(await ledgerSums(h, project.id, 'BTC')).toEqual({ available: '25.0244569', pending: '0' });
});

test('an invoice twice in one group, and again in a later group: credited once', async () => {
  const project = h.auth.addProject('sandbox');
  const invoiceId = randomUUID();
  const told: InvoiceCredit[] = [];
  await applyGroup([paid(project.id, { invoiceId, amount: '0.4' }), paid(project.id, { amount: '0.1' }), paid(project.id, { invoiceId, amount: '0.4' })], told);
  await applyGroup([paid(project.id, { invoiceId, amount: '0.4' })], told);
  expect(told.map((credit) => credit.amount)).toEqual(['0.4', '0.1']);
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.5', pending: '0', total: '0.5' });
  const [entries] = await h.sql<{ n: number }[]>`select count(*)::int as n from ledger_entries where invoice_id = ${invoiceId}`;
  expect(entries?.n).toBe(1);
});

test('a group mixing live and sandbox credits of two coins: each balance of its own environment, coin and network', async () => {
  const sandbox = h.auth.addProject('sandbox');
  const live = h.auth.addProject('live');
  await applyGroup([
    paid(sandbox.id, { amount: '1.5', currency: 'ETH' }),
    paid(live.id, { amount: '0.25', environment: 'live' }),
    paid(sandbox.id, { amount: '0.000000000000000001', currency: 'ETH' }),
    paid(live.id, { amount: '0.75', environment: 'live' }),
    paid(sandbox.id, { amount: '2', currency: 'BTC' }),
  ]);
  expect(await balanceOf(h, sandbox, 'ETH')).toEqual({ available: '1.500000000000000001', pending: '0', total: '1.500000000000000001' });
  expect(await balanceOf(h, sandbox, 'BTC')).toEqual({ available: '2', pending: '0', total: '2' });
  expect(await balanceOf(h, live, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
});

test('a malformed event in a group is skipped; the others are credited', async () => {
  const project = h.auth.addProject('sandbox');
  const broken = paid(project.id, { amount: '1' });
  broken.payload = { ...(broken.payload as object), amount: '-1' };
  await applyGroup([paid(project.id, { amount: '0.3' }), broken, paid(project.id, { amount: '0.7' })]);
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
});
