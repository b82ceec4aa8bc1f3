/**
 * Rule (docs/treasury.md#processor, services/payout/README.md "Processor"): a failure is contained
 * to its nonce group. A chain_transactions row whose outcome cannot be recorded (here
 * recordPayout's "transaction … already completed another payout") is logged, counted
 * (payout_processor_item_errors_total{step="record"}, alert on it) and left for later; the round
 * goes on, so pay and sweep still run.
 *
 * The operator mistake that got there: two payouts to the same address for the same amount; the
 * processor sends A; an operator, settling B by hand, completes B citing A's transaction (it does
 * pay B's address and amount). That completion is refused now
 * (docs/accounting.md#completing-a-payout-by-hand); a hand completion stored before the refusal
 * existed still leaves such a row, and payout C below must still be paid.
 */
import { OPERATOR_TOKEN, rejection, waitFor } from './support/harness';
import { activeProcessor, freshAddress, metricsOf, mineBlocks, startTreasuryWorld, type ProcessorProcess, type TreasuryWorld } from './support/treasury';

let world: TreasuryWorld;
let processor: ProcessorProcess;

beforeAll(async () => {
  world = await startTreasuryWorld({ processorEnv: { CHAIN_ETHEREUM_CONFIRMATIONS: '3' } });
  processor = await world.startProcessor();
  await activeProcessor(processor);
}, 120_000);

afterAll(async () => {
  await world?.dispose();
});

test('a payout whose completion cannot be recorded does not stop the processor from paying the others', async () => {
  const address = freshAddress();
  const b = await world.payout('ETH', '0.3', { address, approve: false });
  await world.h.client.claimPayout({ payoutId: b.id, operatorToken: OPERATOR_TOKEN });
  const a = await world.payout('ETH', '0.3', { address });
  const sentA = await waitFor('A mined (not yet final)', async () => {
    const row = await world.payoutRow(a.id);
    return row.confirmations !== null && row.confirmations >= 1 ? row : undefined;
  }, 20_000);

  // The operator completes B by hand with A's transaction: it pays B's address and amount, and is refused.
  expect(await rejection(world.h.client.completePayout({ payoutId: b.id, transactionHash: sentA.transaction_hash!, operatorToken: OPERATOR_TOKEN }))).toMatchObject({
    code: 'transaction_already_used',
    message: expect.stringContaining('transfer for another payout'),
  });
  expect(await world.payoutRow(b.id)).toMatchObject({ status: 'Pending', transaction_hash: null });
  // The same completion as stored before that refusal existed: B completed by A's hash.
  await world.h.sql`insert into payout_transactions (transaction_hash, payout_id) values (${sentA.transaction_hash!}, ${b.id})`;
  await mineBlocks(world, 3);

  const c = await world.payout('ETH', '0.1');
  const settled = await waitFor('C settled, or given up on', async () => {
    const row = await world.payoutRow(c.id);
    return row.status !== 'Pending' || row.claimed_by !== null ? row : undefined;
  }, 15_000).catch(() => undefined);
  expect(settled).toMatchObject({ claimed_by: 'processor:ethereum' });
  await waitFor('C mined', async () => ((await world.payoutRow(c.id)).confirmations ?? 0) >= 1, 20_000);
  await mineBlocks(world, 3);
  await waitFor('C completed', async () => (await world.payoutRow(c.id)).status === 'Completed', 20_000);
  // A's group is contained: logged (once per interval), counted, never a failed round.
  expect(processor.logs.filter((l) => l.includes('processor round failed'))).toEqual([]);
  expect(processor.logs.filter((l) => l.includes('processor record step failed for one item') && l.includes('already completed another payout')).length).toBe(1);
  expect(await metricsOf(processor)).toMatch(/payout_processor_item_errors_total\{network="ethereum",step="record"\} [1-9]/);
  expect(await world.payoutRow(a.id)).toMatchObject({ status: 'Pending', claimed_by: 'processor:ethereum' });
}, 90_000);
