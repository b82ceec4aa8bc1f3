/**
 * The treasury's merchant and operator surface (issue 23, docs/treasury.md): GetPayout with the
 * in-flight additions (transactionHash while Pending, confirmations, origin, approvedAt), Approve,
 * the sweep-task list and its filters and paging, the Treasury page (addresses, balances read
 * from a real anvil node, pending sweeps, payouts in flight, the approval queue above
 * PAYOUT_AUTO_MAX_<ASSET>) and pause/resume. Rows the processor owns (treasury_networks,
 * sweep_tasks, chain_transactions, a payout's hash and confirmations) are written here with SQL.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { Code } from '@coinvoice/runtime';
import { PayoutStatus } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { deployTokens, sendEth, sendToken, startAnvil, type Anvil, type Tokens } from '../../../test/support/anvil';
import { addressFor, codeOf, OPERATOR_TOKEN, payoutRequest, rejection, startPayoutHarness, type FakeProject, type Harness } from './support/harness';

let anvil: Anvil;
let tokens: Tokens;
let h: Harness;

beforeAll(async () => {
  anvil = await startAnvil();
  tokens = await deployTokens(anvil);
  h = await startPayoutHarness({
    CHAIN_ETHEREUM_RPC_URL: anvil.url,
    CHAIN_ETHEREUM_USDT_CONTRACT: tokens.usdt,
    CHAIN_ETHEREUM_USDC_CONTRACT: tokens.usdc,
    PAYOUT_AUTO_MAX_USDT: '5',
  });
}, 120_000);

afterAll(async () => {
  await h?.dispose();
  await anvil?.stop();
});

/** A verified live payout (Pending) of `amount` `currency`. */
async function pending(project: FakeProject, currency: 'USDT' | 'ETH' | 'BTC', amount: string, network?: string): Promise<string> {
  const { payout } = await h.client.requestPayout(payoutRequest(project, { currency, amount, ...(network ? { network } : {}) }));
  await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
  return payout!.id;
}

const approve = (payoutId: string, operatorToken = OPERATOR_TOKEN) => h.client.approvePayout({ payoutId, operatorToken });
const treasury = async () => (await h.client.getTreasury({ operatorToken: OPERATOR_TOKEN })).networks;
const ethereum = async () => (await treasury()).find((n) => n.network === 'ethereum')!;

/** Marks a claimed payout as sent by the processor: a chain transaction and the payout's hash and confirmations. */
async function inFlight(payoutId: string, confirmations: number): Promise<string> {
  const hash = `0x${randomBytes(32).toString('hex')}`;
  await h.client.claimPayout({ payoutId, operatorToken: OPERATOR_TOKEN });
  await h.sql`
    insert into chain_transactions (network, purpose, payout_id, from_address, to_address, asset, amount, nonce, gas_limit, max_fee_per_gas, max_priority_fee_per_gas, transaction_hash, raw_transaction, status)
    select 'ethereum', 'payout', id, ${addressFor('ETH', 'live')}, address, currency, 1, 0, 21000, 1, 1, ${hash}, '0x00', 'mined' from payouts where id = ${payoutId}`;
  await h.sql`update payouts set transaction_hash = ${hash}, confirmations = ${confirmations} where id = ${payoutId}`;
  return hash;
}

test('GetPayout: the project’s own payout with origin, approvedAt, and while in flight its hash and confirmations; another project’s is not found', async () => {
  const project = h.auth.addProject('live');
  const other = h.auth.addProject('live');
  await h.credit(project, 'USDT', '100');
  const id = await pending(project, 'USDT', '10');
  const { payout } = await h.client.getPayout({ projectId: project.id, payoutId: id });
  expect(payout).toMatchObject({ id, status: PayoutStatus.PENDING, origin: 'merchant', amount: '10' });
  expect(payout!.transactionHash).toBeUndefined();
  expect(payout!.confirmations).toBeUndefined();
  expect(payout!.approvedAt).toBeUndefined();

  await approve(id);
  const hash = await inFlight(id, 3);
  const { payout: sent } = await h.client.getPayout({ projectId: project.id, payoutId: id });
  expect(sent).toMatchObject({ status: PayoutStatus.PENDING, transactionHash: hash, confirmations: 3 });
  expect(sent!.approvedAt).toBeDefined();

  expect(await rejection(h.client.getPayout({ projectId: other.id, payoutId: id }))).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
  expect(await rejection(h.client.getPayout({ projectId: project.id, payoutId: randomUUID() }))).toMatchObject({ code: 'not_found' });
  expect(await rejection(h.client.getPayout({ projectId: project.id, payoutId: 'nope' }))).toMatchObject({ code: 'validation_failed', violations: [{ field: 'payoutId' }] });
});

test('Approve: a live verified unclaimed Pending payout; again answers it unchanged; otherwise payout_not_pending', async () => {
  const project = h.auth.addProject('live');
  await h.credit(project, 'USDT', '100');
  const id = await pending(project, 'USDT', '20');
  const { payout } = await approve(id);
  expect(payout!.approvedAt).toBeDefined();
  const [stored] = await h.sql<{ approved_by: string }[]>`select approved_by from payouts where id = ${id}`;
  expect(stored!.approved_by).toBe(h.auth.operatorTokens.get(OPERATOR_TOKEN));
  const again = await approve(id);
  expect(again.payout!.approvedAt).toEqual(payout!.approvedAt);

  // Claimed before anyone approved it; awaiting its code; completed (sandbox); unknown.
  const claimed = await pending(project, 'USDT', '1');
  await h.client.claimPayout({ payoutId: claimed, operatorToken: OPERATOR_TOKEN });
  expect(await rejection(approve(claimed))).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'payout_not_pending' });
  const { payout: awaiting } = await h.client.requestPayout(payoutRequest(project, { currency: 'USDT', amount: '1' }));
  expect(await rejection(approve(awaiting!.id))).toMatchObject({ code: 'payout_not_pending' });
  const sandbox = h.auth.addProject('sandbox');
  await h.credit(sandbox, 'USDT', '10');
  const completed = await pending(sandbox, 'USDT', '1');
  expect(await rejection(approve(completed))).toMatchObject({ code: 'payout_not_pending' });
  expect(await rejection(approve(randomUUID()))).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
  expect(await rejection(approve(id, 'not-an-operator'))).toMatchObject({ connectCode: Code.Unauthenticated, code: 'invalid_token' });
});

test('sweep tasks: newest first, by invoice, status and network, paged without gaps; bad filters refused', async () => {
  const project = randomUUID();
  const invoices = [randomUUID(), randomUUID()];
  const rows = [
    { invoice: invoices[0]!, network: 'ethereum', asset: 'USDT', amount: '1500000', status: 'pending' },
    { invoice: invoices[0]!, network: 'ethereum', asset: 'ETH', amount: '20000000000000000', status: 'pending' },
    { invoice: invoices[1]!, network: 'ethereum', asset: 'USDC', amount: '100', status: 'skipped_dust' },
    { invoice: invoices[1]!, network: 'base', asset: 'USDC', amount: '7000000', status: 'pending' },
  ];
  const ids: string[] = [];
  for (const [i, r] of rows.entries()) {
    const [row] = await h.sql<{ id: string }[]>`
      insert into sweep_tasks (payment_id, invoice_id, project_id, network, asset, deposit_address, address_index, amount, status, skip_reason)
      values (${`${r.network}:${randomBytes(8).toString('hex')}:${i}`}, ${r.invoice}, ${project}, ${r.network}, ${r.asset}, ${addressFor('ETH', 'live')}, ${i},
              ${r.amount}::numeric, ${r.status}, ${r.status === 'skipped_dust' ? 'below the gas it would cost' : null})
      returning id::text as id`;
    ids.push(row!.id);
  }
  const list = (req: { invoiceId?: string; status?: string; network?: string; pageSize?: number; cursor?: string }) =>
    h.client.listSweepTasks({ operatorToken: OPERATOR_TOKEN, ...req });

  const byInvoice = await list({ invoiceId: invoices[0] });
  expect(byInvoice.sweepTasks.map((t) => t.id)).toEqual([ids[1], ids[0]]);
  expect(byInvoice.sweepTasks[0]).toMatchObject({ asset: 'ETH', amount: '0.02', status: 'pending', network: 'ethereum', projectId: project });
  expect(byInvoice.sweepTasks[1]).toMatchObject({ asset: 'USDT', amount: '1.5' });
  expect((await list({ invoiceId: invoices[1], status: 'skipped_dust' })).sweepTasks).toMatchObject([{ id: ids[2], skipReason: 'below the gas it would cost' }]);
  expect((await list({ invoiceId: invoices[1], network: 'base' })).sweepTasks.map((t) => t.id)).toEqual([ids[3]]);

  // Paging over everything of the four: pages of 1, no duplicates, no gaps, in order.
  const seen: string[] = [];
  let cursor = '';
  do {
    const page = await list({ pageSize: 1, cursor });
    seen.push(...page.sweepTasks.filter((t) => t.projectId === project).map((t) => t.id));
    cursor = page.nextCursor;
  } while (cursor !== '');
  expect(seen).toEqual([...ids].reverse());

  expect(await rejection(list({ status: 'swept' }))).toMatchObject({ code: 'validation_failed', violations: [{ field: 'status' }] });
  expect(await rejection(list({ invoiceId: 'x' }))).toMatchObject({ violations: [{ field: 'invoiceId' }] });
  expect(await rejection(list({ cursor: 'bm9wZQ' }))).toMatchObject({ violations: [{ field: 'cursor' }] });
  expect(await rejection(list({ network: 'Ethereum!' }))).toMatchObject({ violations: [{ field: 'network' }] });
  expect(await rejection(h.client.listSweepTasks({ operatorToken: '' }))).toMatchObject({ connectCode: Code.Unauthenticated });
});

test('the Treasury page: address and balances from the node, pending sweeps, payouts in flight, the approval queue; pause and resume', async () => {
  const address = addressFor('ETH', 'live');
  await h.sql`insert into treasury_networks (network, address) values ('ethereum', ${address})`;
  await sendEth(anvil, address, '1.5');
  await sendToken(anvil, tokens.usdt, address, '250.25');

  const project = h.auth.addProject('live');
  await h.credit(project, 'USDT', '1000');
  await h.credit(project, 'BTC', '1');
  const small = await pending(project, 'USDT', '5');
  const large = await pending(project, 'USDT', '5.000001');
  const approved = await pending(project, 'USDT', '50');
  await approve(approved);
  const sending = await pending(project, 'USDT', '60');
  await approve(sending);
  const hash = await inFlight(sending, 2);
  // Not an Ethereum-treasury asset: sent by hand, not in this queue.
  await pending(project, 'BTC', '0.1');
  // USDT, but on bsc: not the Ethereum treasury's either (docs/treasury.md#processor); approved, it keeps the manual path.
  await h.credit(project, 'USDT', '100', undefined, 'bsc');
  const onBsc = await pending(project, 'USDT', '20', 'bsc');
  await approve(onBsc);
  const onBscUnapproved = await pending(project, 'USDT', '30', 'bsc');

  const network = await ethereum();
  expect(network).toMatchObject({ network: 'ethereum', address, paused: false });
  expect(network.balances).toEqual([
    expect.objectContaining({ asset: 'ETH', amount: '1.5' }),
    expect.objectContaining({ asset: 'USDT', amount: '250.25' }),
    expect.objectContaining({ asset: 'USDC', amount: '0' }),
  ]);
  const queue = network.approvalQueue.map((p) => p.id);
  expect(queue).toContain(large);
  expect(queue).not.toContain(small);
  expect(queue).not.toContain(approved);
  expect(queue).not.toContain(sending);
  expect(network.approvalQueue.every((p) => p.currency !== 'BTC')).toBe(true);
  expect(queue).not.toContain(onBscUnapproved);
  expect(network.approvalQueue.every((p) => p.network === 'ethereum')).toBe(true);
  const claimed = await h.client.claimPayout({ payoutId: onBsc, operatorToken: OPERATOR_TOKEN });
  expect(claimed.payout).toMatchObject({ network: 'bsc', claimedAt: expect.anything() });
  expect(network.inFlight.find((p) => p.id === sending)).toMatchObject({ transactionHash: hash, confirmations: 2 });
  // The sweep-task test's pending rows on ethereum: 1.5 USDT and 0.02 ETH (base is another network).
  const sweeps = Object.fromEntries(network.pendingSweeps.map((s) => [s.asset, s]));
  expect(sweeps.USDT).toMatchObject({ count: 1n, amount: '1.5' });
  expect(sweeps.ETH).toMatchObject({ count: 1n, amount: '0.02' });
  // Every network with a processor is listed (docs/treasury.md#processor), whether it has run or not.
  expect((await treasury()).map((n) => n.network)).toEqual(['bitcoin', 'ethereum', 'litecoin', 'tron']);

  const paused = await h.client.setTreasuryPaused({ network: 'ethereum', paused: true, operatorToken: OPERATOR_TOKEN });
  expect(paused.network).toMatchObject({ network: 'ethereum', paused: true, pausedBy: h.auth.operatorTokens.get(OPERATOR_TOKEN) });
  expect(await h.sql`select paused from treasury_networks where network = 'ethereum'`).toEqual([{ paused: true }]);
  expect(await ethereum()).toMatchObject({ paused: true });
  const resumed = await h.client.setTreasuryPaused({ network: 'ethereum', paused: false, operatorToken: OPERATOR_TOKEN });
  expect(resumed.network).toMatchObject({ paused: false });
  expect(resumed.network!.pausedBy).toBeUndefined();
  expect(await rejection(h.client.setTreasuryPaused({ network: 'bitcoin', paused: true, operatorToken: OPERATOR_TOKEN }))).toMatchObject({ connectCode: Code.NotFound });
  expect(await rejection(h.client.setTreasuryPaused({ network: 'ethereum', paused: true, operatorToken: 'merchant' }))).toMatchObject({ connectCode: Code.Unauthenticated });
  expect(await rejection(h.client.getTreasury({ operatorToken: '' }))).toMatchObject({ connectCode: Code.Unauthenticated });
});

test('without a node, or with one that cannot be reached, each balance is absent with the reason', async () => {
  const closed = await new Promise<number>((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
  for (const [env, reason] of [
    [{}, 'CHAIN_ETHEREUM_RPC_URL is not set'],
    [{ CHAIN_ETHEREUM_RPC_URL: `http://127.0.0.1:${closed}`, CHAIN_ETHEREUM_RPC_TIMEOUT_MS: '500' }, 'the node could not be asked'],
  ] as const) {
    const other = await startPayoutHarness(env);
    try {
      await other.sql`insert into treasury_networks (network, address) values ('ethereum', ${addressFor('ETH', 'live')})`;
      const network = (await other.client.getTreasury({ operatorToken: OPERATOR_TOKEN })).networks.find((n) => n.network === 'ethereum');
      expect(network!.balances.map((b) => b.asset)).toEqual(['ETH', 'USDT', 'USDC']);
      for (const balance of network!.balances) {
        expect(balance.amount).toBeUndefined();
        expect(balance.unavailableReason).toContain(reason);
      }
    } finally {
      await other.dispose();
    }
  }
}, 60_000);
