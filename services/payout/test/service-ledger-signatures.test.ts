/**
 * The ledger credits only events the invoice service signed (docs/events.md), over real NATS and
 * Postgres: a correctly shaped invoice.paid (or invoice.late_payment) published without a
 * signature, with a wrong one, or with another service's, credits nothing; it is dead-lettered,
 * counted in events_rejected_total and does not hold up the signed events behind it.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { SIGNATURE_HEADER } from '@coinvoice/runtime';
import { InvoiceLatePaymentSchema, InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { headers as natsHeaders } from 'nats';
import { testEventKeys } from '../../../test/support/event-keys';
import { balanceOf, startPayoutHarness, waitFor, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness();
});

afterAll(async () => {
  await h?.dispose();
});

/** Publishes on the invoice stream with the signature header given (none when undefined). */
async function publishRaw(type: string, payload: unknown, signature: (subject: string, id: string, body: Uint8Array) => string | undefined): Promise<string> {
  const id = randomUUID();
  const subject = h.namespace.subject(type);
  const body = new TextEncoder().encode(JSON.stringify(payload));
  const headers = natsHeaders();
  headers.set('event-type', type);
  const value = signature(subject, id, body);
  if (value !== undefined) headers.set(SIGNATURE_HEADER, value);
  await h.nats.jetstream().publish(subject, body, { msgID: id, headers });
  return id;
}

function invoicePaid(projectId: string, amount: string) {
  const invoiceId = randomUUID();
  return toJson(
    InvoicePaidSchema,
    create(InvoicePaidSchema, {
      invoiceId,
      projectId,
      orderId: `order-${invoiceId.slice(0, 8)}`,
      status: 'Paid',
      amount,
      currency: 'ETH',
      environment: 'live',
      transactionHash: 'ab'.repeat(32),
      paidAt: timestampFromDate(new Date()),
    }),
  );
}

async function rejectedCount(reason: string, consumer: string): Promise<number> {
  const text = await (await fetch(`${h.svc.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('events_rejected_total{') && l.includes(`reason="${reason}"`) && l.includes(`consumer="${consumer}"`));
  return line ? Number(line.split(' ').pop()) : 0;
}

test('an invoice.paid without a signature, with a wrong one or with another service\'s credits nothing: dead-lettered and counted', async () => {
  const project = h.auth.addProject('live');
  const keys = testEventKeys();
  const unsigned = await publishRaw('invoice.paid', invoicePaid(project.id, '1000'), () => undefined);
  const wrong = await publishRaw('invoice.paid', invoicePaid(project.id, '1000'), () => Buffer.alloc(64, 1).toString('base64'));
  const otherService = await publishRaw('invoice.paid', invoicePaid(project.id, '1000'), (subject, id, body) => keys.signer('notifier').sign(subject, id, body));
  // A genuine signature of another event, copied: it covers that event's id and body, not these.
  const copied = keys.signer('invoice').sign(h.namespace.subject('invoice.paid'), randomUUID(), new TextEncoder().encode('{}'));
  const replayed = await publishRaw('invoice.paid', invoicePaid(project.id, '1000'), () => copied);
  const refused = [unsigned, wrong, otherService, replayed];

  // A signed one behind them is credited: the refused ones hold nothing up.
  await h.credit(project, 'ETH', '0.8');
  await waitFor('every refused event to be dead-lettered', async () => {
    const rows = await h.sql`select 1 from dead_letter_events where event_id in ${h.sql(refused)}`;
    return rows.length === refused.length || undefined;
  });

  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '0.8', pending: '0', total: '0.8' });
  // One ledger entry: the signed 0.8, compared exactly in SQL's numeric.
  const entries = await h.sql`select kind, amount = 0.8 as exact from ledger_entries where project_id = ${project.id}`;
  expect(entries.map((e) => ({ ...e }))).toEqual([{ kind: 'credit_invoice', exact: true }]);
  const dead = await h.sql<{ event_id: string; consumer_name: string; reason: string }[]>`
    select event_id, consumer_name, reason from dead_letter_events where event_id in ${h.sql(refused)} order by stream_sequence`;
  expect(dead.map((r) => ({ ...r }))).toEqual([
    { event_id: unsigned, consumer_name: 'payout-ledger', reason: 'missing_signature' },
    { event_id: wrong, consumer_name: 'payout-ledger', reason: 'bad_signature' },
    { event_id: otherService, consumer_name: 'payout-ledger', reason: 'bad_signature' },
    { event_id: replayed, consumer_name: 'payout-ledger', reason: 'bad_signature' },
  ]);
  expect(await h.sql`select 1 from processed_events where event_id in ${h.sql(refused)}`).toHaveLength(0);
  expect(await rejectedCount('missing_signature', 'payout-ledger')).toBe(1);
  expect(await rejectedCount('bad_signature', 'payout-ledger')).toBe(3);
});

test('an unsigned invoice.late_payment credits nothing either', async () => {
  const project = h.auth.addProject('live');
  const invoiceId = randomUUID();
  const late = toJson(
    InvoiceLatePaymentSchema,
    create(InvoiceLatePaymentSchema, {
      invoiceId,
      projectId: project.id,
      environment: 'live',
      currency: 'ETH',
      amount: '1000',
      paymentId: 'ethereum:0xfeed:-1',
      credited: true,
      status: 'Expired',
      transactionHash: '0xfeed',
    }),
  );
  const id = await publishRaw('invoice.late_payment', late, () => undefined);
  await waitFor('the late payment to be dead-lettered', async () => {
    const rows = await h.sql`select consumer_name, reason from dead_letter_events where event_id = ${id}`;
    return rows.length === 1 ? rows : undefined;
  });
  expect(await h.sql`select consumer_name, reason from dead_letter_events where event_id = ${id}`).toEqual([{ consumer_name: 'payout-ledger-late', reason: 'missing_signature' }]);
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '0', pending: '0', total: '0' });
  expect(await rejectedCount('missing_signature', 'payout-ledger-late')).toBe(1);
});
