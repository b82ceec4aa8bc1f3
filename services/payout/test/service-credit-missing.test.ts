/**
 * CreditMissing (docs/accounting.md#crediting-what-is-missing): what the invoice service reported
 * and the ledger never got — its event lost, e.g. with a JetStream store — is credited by an
 * operator's call as the event would have been: exactly, once (a second call, or the event
 * arriving afterwards, credits nothing more), a late payment by its payment id; a report the
 * ledger cannot take is skipped with the reason; only operators may call it.
 */
import { randomUUID } from 'node:crypto';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { balanceOf, OPERATOR_TOKEN, rejection, startPayoutHarness, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness({ LEDGER_CHECK_GRACE_MS: '60000' });
});

afterAll(async () => {
  await h?.dispose();
});

const anHourAgo = () => timestampFromDate(new Date(Date.now() - 3_600_000));

test('a reported invoice.paid and a late payment the ledger lacks are credited exactly, once; the event arriving afterwards credits nothing; an unknown coin is skipped with its reason', async () => {
  const project = h.auth.addProject('live');
  const paidInvoice = randomUUID();
  const lateInvoice = randomUUID();
  const paymentId = `ethereum:0x${'cd'.repeat(32)}:0`;
  const oddInvoice = randomUUID();
  const recent = randomUUID();
  h.invoice.reportedCredits.push(
    { invoiceId: paidInvoice, projectId: project.id, paymentId: '', currency: 'ETH', network: 'ethereum', amount: '1.000000000000000001', reportedAt: anHourAgo() },
    { invoiceId: lateInvoice, projectId: project.id, paymentId, currency: 'ETH', network: 'ethereum', amount: '0.25', reportedAt: anHourAgo() },
    { invoiceId: oddInvoice, projectId: project.id, paymentId: '', currency: 'DOGE', network: 'ethereum', amount: '3', reportedAt: anHourAgo() },
    // Reported a moment ago: its event may still be on its way (LEDGER_CHECK_GRACE_MS); not credited.
    { invoiceId: recent, projectId: project.id, paymentId: '', currency: 'ETH', network: 'ethereum', amount: '7', reportedAt: timestampFromDate(new Date()) },
  );

  expect(await rejection(h.client.creditMissing({ operatorToken: 'not-an-operator' }))).toMatchObject({ code: 'invalid_token' });
  const repaired = await h.client.creditMissing({ operatorToken: OPERATOR_TOKEN });
  expect(repaired.credited.map((c) => ({ invoiceId: c.invoiceId, paymentId: c.paymentId, currency: c.currency, network: c.network, amount: c.amount }))).toEqual([
    { invoiceId: paidInvoice, paymentId: '', currency: 'ETH', network: 'ethereum', amount: '1.000000000000000001' },
    { invoiceId: lateInvoice, paymentId, currency: 'ETH', network: 'ethereum', amount: '0.25' },
  ]);
  expect(repaired.skipped).toEqual([expect.objectContaining({ kind: 'credit_missing', detail: expect.stringContaining(`invoice ${oddInvoice} (invoice.paid): currency`) })]);
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '1.250000000000000001', pending: '0', total: '1.250000000000000001' });

  // The lost event turns up after all (a store restored): nothing more.
  const late = await h.publishInvoicePaid({ invoiceId: paidInvoice, projectId: project.id, environment: 'live', currency: 'ETH', amount: '1.000000000000000001', payNetwork: 'ethereum' });
  await h.processed(late);
  expect(await balanceOf(h, project, 'ETH')).toMatchObject({ available: '1.250000000000000001' });
  // A second call: nothing more either.
  expect((await h.client.creditMissing({ operatorToken: OPERATOR_TOKEN })).credited.filter((c) => c.projectId === project.id)).toEqual([]);
  expect(await balanceOf(h, project, 'ETH')).toMatchObject({ available: '1.250000000000000001' });
  const entries = await h.sql<{ kind: string; event_id: string }[]>`select kind, event_id from ledger_entries where project_id = ${project.id} order by id`;
  expect(entries).toEqual([
    { kind: 'credit_invoice', event_id: expect.stringMatching(new RegExp(`^ledger-repair:[0-9a-f-]{36}:${paidInvoice}$`)) },
    { kind: 'credit_late_payment', event_id: expect.stringMatching(/^ledger-repair:/) },
  ]);
  const res = await h.client.getBalance({ projectId: project.id, environment: Environment.LIVE });
  expect(res.balances.map((b) => b.currency)).toEqual(['ETH']);
});
