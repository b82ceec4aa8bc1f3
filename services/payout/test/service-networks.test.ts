/**
 * Balances and payouts per (currency, network) (docs/accounting.md#balances-per-network, issue 24):
 * USDT credited on bsc and on ethereum are two balances; a payout names its network (default: the
 * currency's), is validated against the registry and that network's address format, and holds
 * and debits that balance only. The ledger consumer credits the event's pay_network (events from
 * before networks: the default network) and the invariant check compares per network.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, createLogger } from '@coinvoice/runtime';
import { InvoiceLatePaymentSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { AccountedDepositSchema, LedgerCreditSchema, type LedgerCredit } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { PayoutStatus } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { checkLedgerInvariants } from '../src/invariants/ledger-check';
import { sweepTaskOf } from '../src/processor/sweep-intake';
import { waitFor } from '../../../test/support/async';
import { addressFor, balanceOf, codeOf, environmentOf, payoutRequest, rejection, startPayoutHarness, type FakeProject, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness();
});

afterAll(async () => {
  await h?.dispose();
});

async function balances(project: FakeProject) {
  const res = await h.client.getBalance({ projectId: project.id, environment: environmentOf(project) });
  return res.balances.map((b) => ({ currency: b.currency, network: b.network, available: b.available, pending: b.pending, total: b.total }));
}

async function publishLatePayment(late: { invoiceId: string; projectId: string; currency: string; amount: string; paymentId: string; credited: boolean; payNetwork?: string; network?: string }) {
  const id = randomUUID();
  const message = create(InvoiceLatePaymentSchema, { ...late, environment: 'live', status: 'Paid', transactionHash: '0x' + 'ab'.repeat(32) });
  await h.publishEvent({ id, type: 'invoice.late_payment', payload: toJson(InvoiceLatePaymentSchema, message), key: late.invoiceId });
  await waitFor(`late payment ${id} processed`, async () => {
    const rows = await h.sql`select 1 from processed_events where consumer_name = 'payout-ledger-late' and event_id = ${id}`;
    return rows.length === 1 || undefined;
  });
}

test('USDT credited on bsc and on ethereum are two balances, listed separately, to the exact base unit', async () => {
  const project = h.auth.addProject('live');
  // bsc USDT has 18 decimals on chain: the credit keeps every one of them.
  await h.credit(project, 'USDT', '100.123456789012345678', randomUUID(), 'bsc');
  await h.credit(project, 'USDT', '5.5', randomUUID(), 'ethereum');
  await h.credit(project, 'USDT', '0.000001', randomUUID(), 'tron');
  expect(await balances(project)).toEqual([
    { currency: 'USDT', network: 'bsc', available: '100.123456789012345678', pending: '0', total: '100.123456789012345678' },
    { currency: 'USDT', network: 'ethereum', available: '5.5', pending: '0', total: '5.5' },
    { currency: 'USDT', network: 'tron', available: '0.000001', pending: '0', total: '0.000001' },
  ]);
  // Finer than the network's base unit is refused (6 decimals on ethereum): nothing credited.
  const invoiceId = randomUUID();
  const eventId = await h.publishInvoicePaid({ invoiceId, projectId: project.id, environment: 'live', currency: 'USDT', amount: '1.0000001', payNetwork: 'ethereum' });
  await h.processed(eventId);
  expect(await h.sql`select 1 from ledger_entries where invoice_id = ${invoiceId}`).toHaveLength(0);
});

test('the ledger consumer credits pay_network; an event without one (older messages) credits the default network; a network that does not carry the coin credits nothing', async () => {
  const project = h.auth.addProject('live');
  await h.credit(project, 'USDC', '7', randomUUID()); // no pay_network: ethereum
  await h.credit(project, 'USDC', '3', randomUUID(), 'base');
  await h.credit(project, 'BNB', '0.5', randomUUID()); // BNB's default network is bsc
  const stray = randomUUID();
  await h.processed(await h.publishInvoicePaid({ invoiceId: stray, projectId: project.id, environment: 'live', currency: 'USDT', amount: '1', payNetwork: 'base' }));
  expect(await h.sql`select 1 from ledger_entries where invoice_id = ${stray}`).toHaveLength(0);
  expect(await balances(project)).toEqual([
    { currency: 'BNB', network: 'bsc', available: '0.5', pending: '0', total: '0.5' },
    { currency: 'USDC', network: 'base', available: '3', pending: '0', total: '3' },
    { currency: 'USDC', network: 'ethereum', available: '7', pending: '0', total: '7' },
  ]);
  const entries = await h.sql<{ currency: string; network: string }[]>`select currency, network from ledger_entries where project_id = ${project.id} order by currency, network`;
  expect(entries.map((e) => `${e.currency}@${e.network}`)).toEqual(['BNB@bsc', 'USDC@base', 'USDC@ethereum']);
});

test('late payments: credited ones land in (currency, pay_network), a wrong-network one (credited false) never credits', async () => {
  const project = h.auth.addProject('live');
  const invoiceId = await h.credit(project, 'USDT', '10', randomUUID(), 'bsc');
  await publishLatePayment({ invoiceId, projectId: project.id, currency: 'USDT', amount: '2.5', paymentId: 'bsc:0xaa:1', credited: true, payNetwork: 'bsc', network: 'bsc' });
  // Sent on ethereum to the bsc invoice's address: reported, never credited.
  await publishLatePayment({ invoiceId, projectId: project.id, currency: 'USDT', amount: '4', paymentId: 'ethereum:0xbb:1', credited: false, payNetwork: 'bsc', network: 'ethereum' });
  // A self-contradicting one (credited, but on another network) is refused too.
  await publishLatePayment({ invoiceId, projectId: project.id, currency: 'USDT', amount: '8', paymentId: 'ethereum:0xcc:1', credited: true, payNetwork: 'bsc', network: 'ethereum' });
  // An older late payment without networks: the default network.
  await publishLatePayment({ invoiceId: randomUUID(), projectId: project.id, currency: 'USDT', amount: '1', paymentId: 'ethereum:0xdd:1', credited: true });
  expect(await balances(project)).toEqual([
    { currency: 'USDT', network: 'bsc', available: '12.5', pending: '0', total: '12.5' },
    { currency: 'USDT', network: 'ethereum', available: '1', pending: '0', total: '1' },
  ]);
});

describe('a payout names its network', () => {
  test('USDT on bsc to an EVM address: holds and debits the bsc balance only; payout, events and history carry network', async () => {
    const project = h.auth.addProject('sandbox');
    await h.credit(project, 'USDT', '100', randomUUID(), 'bsc');
    await h.credit(project, 'USDT', '5', randomUUID(), 'ethereum');
    const address = addressFor('USDT', 'sandbox');
    const { payout } = await h.client.requestPayout(payoutRequest(project, { currency: 'USDT', network: 'bsc', amount: '60.123456', address }));
    expect(payout).toMatchObject({ currency: 'USDT', network: 'bsc', amount: '60.123456', address, status: PayoutStatus.AWAITING_VERIFICATION });
    expect(await balanceOf(h, project, 'USDT', 'bsc')).toEqual({ available: '39.876544', pending: '60.123456', total: '100' });
    expect(await balanceOf(h, project, 'USDT', 'ethereum')).toEqual({ available: '5', pending: '0', total: '5' });
    // The verification email names the network: one EVM address is valid on every EVM network.
    expect(h.notifier.payoutEmails.find((e) => e.payoutId === payout!.id)).toMatchObject({ address, network: 'bsc' });
    // Sandbox: verified, it completes at once with a simulated hash in the network's format.
    const { payout: done } = await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
    expect(done).toMatchObject({ status: PayoutStatus.COMPLETED, network: 'bsc', transactionHash: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    expect(await balanceOf(h, project, 'USDT', 'bsc')).toEqual({ available: '39.876544', pending: '0', total: '39.876544' });
    expect(await balanceOf(h, project, 'USDT', 'ethereum')).toEqual({ available: '5', pending: '0', total: '5' });
    const entries = await h.sql<{ kind: string; network: string }[]>`select kind, network from ledger_entries where payout_id = ${payout!.id} order by id`;
    expect(entries).toEqual([
      { kind: 'hold', network: 'bsc' },
      { kind: 'debit', network: 'bsc' },
    ]);
    const events = await h.sql<{ event_type: string; payload: { network?: string } }[]>`select event_type, payload from outbox where event_key = ${payout!.id} order by seq`;
    expect(events.map((e) => [e.event_type, e.payload.network])).toEqual([
      ['payout.requested', 'bsc'],
      ['payout.verified', 'bsc'],
      ['payout.completed', 'bsc'],
    ]);
    const history = await h.client.listPayouts({ projectId: project.id, pageSize: 10 });
    expect(history.payouts.map((p) => p.network)).toEqual(['bsc']);
  });

  test('100 USDT on bsc and none on ethereum: a payout on ethereum (or with no network) is insufficient_balance', async () => {
    const project = h.auth.addProject('live');
    await h.credit(project, 'USDT', '100', randomUUID(), 'bsc');
    const address = addressFor('USDT', 'live');
    for (const network of ['ethereum', undefined]) {
      const err = await rejection(h.client.requestPayout(payoutRequest(project, { currency: 'USDT', amount: '1', address, ...(network ? { network } : {}) })));
      expect(err).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'insufficient_balance' });
      expect(err.message).toContain('USDT balance on ethereum (0)');
    }
    const { payout } = await h.client.requestPayout(payoutRequest(project, { currency: 'USDT', network: 'bsc', amount: '100', address }));
    expect(payout).toMatchObject({ network: 'bsc', amount: '100' });
    expect(await balanceOf(h, project, 'USDT', 'bsc')).toEqual({ available: '0', pending: '100', total: '100' });
  });

  test('no network: the currency default network (USDT → ethereum, BTC → bitcoin)', async () => {
    const project = h.auth.addProject('sandbox');
    await h.credit(project, 'USDT', '10', randomUUID(), 'ethereum');
    await h.credit(project, 'BTC', '1');
    const usdt = await h.client.requestPayout(payoutRequest(project, { currency: 'USDT', amount: '2' }));
    expect(usdt.payout).toMatchObject({ currency: 'USDT', network: 'ethereum' });
    const btc = await h.client.requestPayout(payoutRequest(project, { currency: 'BTC', amount: '0.1' }));
    expect(btc.payout).toMatchObject({ currency: 'BTC', network: 'bitcoin' });
    expect(await balanceOf(h, project, 'USDT', 'ethereum')).toEqual({ available: '8', pending: '2', total: '10' });
  });

  test.each([
    ['USDT on tron with an EVM address', 'address', { currency: 'USDT' as const, network: 'tron', address: () => addressFor('USDT', 'live') }, /^is not a valid USDT mainnet address on Tron: it /],
    ['USDT on base (not carried)', 'network', { currency: 'USDT' as const, network: 'base', address: () => addressFor('USDT', 'live') }, 'does not carry USDT: USDT is paid out on ethereum, arbitrum, optimism, polygon, bsc, tron'],
    ['an unknown network', 'network', { currency: 'USDT' as const, network: 'solana', address: () => addressFor('USDT', 'live') }, 'must be one of ethereum, arbitrum, optimism, polygon, bsc, tron'],
    ['a Tron address for USDT on bsc', 'address', { currency: 'USDT' as const, network: 'bsc', address: () => addressFor('TRX', 'live') }, /^is not a valid USDT mainnet address on BNB Smart Chain: it /],
    ['7 decimals of USDT on bsc (payout amounts keep 6)', 'amount', { currency: 'USDT' as const, network: 'bsc', address: () => addressFor('USDT', 'live'), amount: '1.0000001' }, 'must have at most 6 decimal places for USDT'],
  ])('%s → 400 validation_failed on %s', async (_name, field, input, message) => {
    const project = h.auth.addProject('live');
    await h.credit(project, 'USDT', '100', randomUUID(), 'bsc');
    await h.credit(project, 'USDT', '100', randomUUID(), 'tron');
    const err = await rejection(
      h.client.requestPayout(payoutRequest(project, { currency: input.currency, network: input.network, address: input.address(), amount: 'amount' in input ? input.amount : '1' })),
    );
    expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
    expect(err.violations).toContainEqual({ field, message: typeof message === 'string' ? message : expect.stringMatching(message) });
    expect(await h.sql`select 1 from payouts where project_id = ${project.id}`).toHaveLength(0);
  });

  test('a Tron address for USDT on tron is accepted and debits the tron balance', async () => {
    const project = h.auth.addProject('live');
    await h.credit(project, 'USDT', '20', randomUUID(), 'tron');
    const address = addressFor('TRX', 'live');
    const { payout } = await h.client.requestPayout(payoutRequest(project, { currency: 'USDT', network: 'tron', amount: '20', address }));
    expect(payout).toMatchObject({ network: 'tron', address });
    expect(await balanceOf(h, project, 'USDT', 'tron')).toEqual({ available: '0', pending: '20', total: '20' });
  });

  test('Idempotency-Key: the same body replays; the same key with another network is 422 idempotency_key_reused', async () => {
    const project = h.auth.addProject('sandbox');
    await h.credit(project, 'USDT', '50', randomUUID(), 'bsc');
    await h.credit(project, 'USDT', '50', randomUUID(), 'polygon');
    const address = addressFor('USDT', 'sandbox');
    const body = payoutRequest(project, { currency: 'USDT', network: 'bsc', amount: '10', address, idempotencyKey: `k-${randomUUID()}` });
    const first = await h.client.requestPayout(body);
    const again = await h.client.requestPayout(body);
    expect(again).toMatchObject({ idempotentReplay: true, payout: { id: first.payout!.id, network: 'bsc' } });
    const err = await rejection(h.client.requestPayout({ ...body, network: 'polygon' }));
    expect(err).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'idempotency_key_reused' });
    expect(await balanceOf(h, project, 'USDT', 'polygon')).toEqual({ available: '50', pending: '0', total: '50' });
  });
});

test('the ledger invariant check compares credits per (currency, network)', async () => {
  const project = h.auth.addProject('live');
  const onBsc = await h.credit(project, 'USDC', '9', randomUUID(), 'bsc');
  const onDefault = await h.credit(project, 'USDC', '4', randomUUID());
  const reported = (invoiceId: string, network: string, amount: string): LedgerCredit =>
    create(LedgerCreditSchema, { invoiceId, projectId: project.id, currency: 'USDC', amount, network, reportedAt: timestampFromDate(new Date(Date.now() - 3_600_000)) });
  const check = (credits: LedgerCredit[]) =>
    checkLedgerInvariants({
      sql: h.sql,
      reportedCredits: async () => ({ credits, nextAfterInvoiceId: '' }),
      graceMs: 60_000,
      logger: createLogger({ service: 'test', level: 'silent' }),
    });
  const mine = (result: Awaited<ReturnType<typeof check>>) => result.violations.filter((v) => v.detail.includes(onBsc) || v.detail.includes(onDefault));

  // As credited: bsc, and the default network reported with an empty network (an older invoice service).
  expect(mine(await check([reported(onBsc, 'bsc', '9'), reported(onDefault, '', '4')]))).toEqual([]);
  // The same amount reported on another network than credited is a violation.
  expect(mine(await check([reported(onBsc, 'ethereum', '9'), reported(onDefault, 'ethereum', '4')]))).toEqual([
    { kind: 'credit_amount_mismatch', detail: `invoice ${onBsc} (invoice.paid): reported 9 USDC on ethereum, credited 9 USDC on bsc` },
  ]);
  // A balance row that differs from its network's entries is found on that network.
  await h.sql`update balances set available = available + 1 where project_id = ${project.id} and currency = 'USDC' and network = 'bsc'`;
  const broken = (await check([reported(onBsc, 'bsc', '9'), reported(onDefault, 'ethereum', '4')])).violations.filter((v) => v.detail.includes(project.id));
  expect(broken).toEqual([{ kind: 'balance_mismatch', detail: `project ${project.id} live USDC on bsc: balance available 10 pending 0, entries say available 9 pending 0` }]);
  await h.sql`update balances set available = available - 1 where project_id = ${project.id} and currency = 'USDC' and network = 'bsc'`;
});

test('the Ethereum sweep intake takes ethereum deposits only: a USDT deposit on bsc (18 decimals) is not its task', () => {
  const deposit = (chain: string, amount: string) =>
    create(AccountedDepositSchema, {
      paymentId: `${chain}:0x${'cd'.repeat(32)}:0`,
      invoiceId: randomUUID(),
      projectId: randomUUID(),
      chain,
      address: addressFor('USDT', 'live'),
      addressIndex: 3,
      asset: 'USDT',
      amount,
    });
  const assets = new Set(['ETH', 'USDT', 'USDC']);
  expect(sweepTaskOf(deposit('bsc', '1.000000000000000001'), 'ethereum', assets)).toEqual({ ok: false, reason: 'deposit on bsc, not ethereum' });
  const taken = sweepTaskOf(deposit('ethereum', '1.5'), 'ethereum', assets);
  expect(taken).toMatchObject({ ok: true, task: { asset: 'USDT', amount: 1_500_000n } });
});
