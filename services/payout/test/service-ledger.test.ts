/**
 * The ledger's feed over real NATS and Postgres: invoice.paid events on the invoice stream credit
 * the project's balance in that environment and coin exactly once per invoice, whatever number of
 * times (and under whatever event ids) they arrive; live and sandbox balances never mix; a
 * malformed event is skipped without holding up the ones behind it; the balances row always
 * equals the sums of the append-only ledger.
 */
import { randomUUID } from 'node:crypto';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { balanceOf, ledgerSums, mapLimit, rejection, startPayoutHarness, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness();
});

afterAll(async () => {
  await h?.dispose();
});

test('two paid invoices credit the sum in that coin; total = available + pending', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'BTC', '0.0015');
  await h.credit(project, 'BTC', '0.00025');
  await h.credit(project, 'ETH', '1.5');

  const res = await h.client.getBalance({ projectId: project.id, environment: Environment.SANDBOX });
  expect(res).toMatchObject({
    projectId: project.id,
    environment: Environment.SANDBOX,
    balances: [
      { currency: 'BTC', available: '0.00175', pending: '0', total: '0.00175' },
      { currency: 'ETH', available: '1.5', pending: '0', total: '1.5' },
    ],
  });
  expect(await ledgerSums(h, project.id, 'BTC')).toEqual({ available: '0.00175', pending: '0' });
});

test('the same invoice.paid delivered again under a new event id credits once', async () => {
  const project = h.auth.addProject('sandbox');
  const invoiceId = randomUUID();
  const paid = { invoiceId, projectId: project.id, environment: 'sandbox', currency: 'LTC', amount: '2.5' };
  const first = await h.publishInvoicePaid(paid);
  await h.processed(first);
  // As a relay would after a crash outside JetStream's duplicate window: same event, new message id.
  const again = await h.publishInvoicePaid(paid);
  await h.processed(again);
  // And the very same message id again (JetStream drops it; nothing may change either way).
  await h.publishInvoicePaid(paid, { eventId: first });

  expect(await balanceOf(h, project, 'LTC')).toEqual({ available: '2.5', pending: '0', total: '2.5' });
  const credits = await h.sql`select event_id from ledger_entries where invoice_id = ${invoiceId}`;
  expect(credits.map((r) => r.event_id)).toEqual([first]);
  const processed = await h.sql`select event_id from processed_events where event_id in ${h.sql([first, again])}`;
  expect(processed).toHaveLength(2);
});

test('sandbox money never reaches a live balance: the environment is part of the balance', async () => {
  const live = h.auth.addProject('live');
  // A sandbox payment naming the live project's id (it cannot happen through the API; the ledger holds regardless).
  const sandboxEvent = await h.publishInvoicePaid({ projectId: live.id, environment: 'sandbox', currency: 'BTC', amount: '5' });
  await h.processed(sandboxEvent);
  expect((await h.client.getBalance({ projectId: live.id, environment: Environment.LIVE })).balances).toEqual([]);
  expect((await h.client.getBalance({ projectId: live.id, environment: Environment.SANDBOX })).balances).toMatchObject([
    { currency: 'BTC', available: '5' },
  ]);

  // A live payment credits the live balance only.
  await h.credit(live, 'BTC', '0.1');
  expect(await balanceOf(h, live, 'BTC')).toEqual({ available: '0.1', pending: '0', total: '0.1' });
  expect((await h.client.getBalance({ projectId: live.id, environment: Environment.SANDBOX })).balances).toMatchObject([
    { currency: 'BTC', available: '5' },
  ]);
});

test('40 invoices paid at once credit exactly their sum', async () => {
  const project = h.auth.addProject('sandbox');
  const ids = await mapLimit(40, 10, (i) =>
    h.publishInvoicePaid({ projectId: project.id, environment: 'sandbox', currency: 'USDT', amount: `${i + 1}.000001` }),
  );
  for (const id of ids) await h.processed(id);
  // Σ(i+1) for i < 40 = 820, plus 40 × 0.000001.
  expect(await balanceOf(h, project, 'USDT')).toEqual({ available: '820.00004', pending: '0', total: '820.00004' });
  expect(await ledgerSums(h, project.id, 'USDT')).toEqual({ available: '820.00004', pending: '0' });
});

test.each([
  ['an unsupported coin', { currency: 'DOGE', amount: '1' }],
  ['a negative amount', { currency: 'BTC', amount: '-1' }],
  ['a zero amount', { currency: 'BTC', amount: '0' }],
  ['an unknown environment', { currency: 'BTC', amount: '1', environment: 'staging' }],
  ['an amount finer than the coin\'s base unit (USDT: 6 decimals)', { currency: 'USDT', amount: '1.0000001' }],
  ['an amount finer than a satoshi', { currency: 'BTC', amount: '0.000000001' }],
])('an invoice.paid with %s is skipped, and the events behind it are still credited', async (_what, fields) => {
  const project = h.auth.addProject('sandbox');
  const bad = await h.publishInvoicePaid({ projectId: project.id, environment: 'sandbox', ...fields });
  await h.processed(bad);
  await h.credit(project, 'BTC', '0.2');
  const res = await h.client.getBalance({ projectId: project.id, environment: Environment.SANDBOX });
  expect(res.balances).toMatchObject([{ currency: 'BTC', available: '0.2', pending: '0', total: '0.2' }]);
});

test('GetBalance refuses a malformed project id or an unspecified environment', async () => {
  expect(await rejection(h.client.getBalance({ projectId: 'nope', environment: Environment.SANDBOX }))).toMatchObject({
    code: 'validation_failed',
    violations: [{ field: 'projectId', message: 'must be a UUID' }],
  });
  expect(await rejection(h.client.getBalance({ projectId: randomUUID(), environment: Environment.UNSPECIFIED }))).toMatchObject({
    code: 'validation_failed',
    violations: [{ field: 'environment', message: 'must be live or sandbox' }],
  });
});

test('the ledger is append-only in practice: a balance can never go negative (CHECK constraint)', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'TRX', '10');
  await expect(h.sql`update balances set available = available - 11 where project_id = ${project.id}`).rejects.toThrow(/balances_available_check/);
});
