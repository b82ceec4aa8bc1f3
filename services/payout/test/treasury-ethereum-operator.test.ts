/**
 * An operator cannot finish a payout the treasury's processor is sending (docs/treasury.md#processor):
 * found by the review of issue 23 — a Reject while its transaction waited in the mempool released the
 * hold, the transaction was then mined, and the merchant's balance paid for the coins a second time.
 * Now Reject and Complete by hand answer 409 `payout_sent_by_processor`; the chain finishes the
 * payout, and coins that reached the address are debited, never released back.
 */
import { parseEther } from 'viem';
import { OPERATOR_TOKEN, ledgerSums, rejection, waitFor } from './support/harness';
import { activeProcessor, mineBlocks, startTreasuryWorld, type TreasuryWorld } from './support/treasury';

let world: TreasuryWorld;

beforeAll(async () => {
  world = await startTreasuryWorld();
  await activeProcessor(await world.startProcessor());
}, 120_000);

afterAll(async () => {
  await world?.anvil.testClient.setAutomine(true).catch(() => undefined);
  await world?.dispose();
});

test('an operator can neither Reject nor Complete a payout the processor is sending; its coins that leave are debited once', async () => {
  await world.anvil.testClient.setAutomine(false);
  const payout = await world.payout('ETH', '2.5');
  const [row] = await waitFor('the payout broadcast', async () => {
    const rows = await world.chainTransactions(payout.id);
    return rows.length > 0 && rows[0]!.status === 'broadcast' ? rows : undefined;
  }, 20_000);
  expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending', claimed_by: 'processor:ethereum' });

  // The operator, seeing a payout "stuck" in Pending, rejects it, or completes it by hand with
  // another transaction: both refused.
  const reject = await rejection(world.h.client.rejectPayout({ payoutId: payout.id, adminNote: 'looks stuck', operatorToken: OPERATOR_TOKEN }));
  const rejectRefused = reject.code === 'payout_sent_by_processor';
  expect(await rejection(world.h.client.completePayout({ payoutId: payout.id, transactionHash: `0x${'ab'.repeat(32)}`, operatorToken: OPERATOR_TOKEN }))).toMatchObject({
    code: 'payout_sent_by_processor',
  });

  await world.anvil.testClient.setAutomine(true);
  await mineBlocks(world, 2);
  await waitFor('the transfer mined', async () => (await world.anvil.publicClient.getTransactionReceipt({ hash: row!.transaction_hash as `0x${string}` }).catch(() => null)) !== null, 20_000);
  const paid = await world.anvil.publicClient.getBalance({ address: payout.address });
  expect(paid).toBe(parseEther('2.5')); // the coins left the treasury either way

  const after = await waitFor('the payout finished by the chain', async () => {
    const current = await world.payoutRow(payout.id);
    if (current.status === 'Pending') await mineBlocks(world, 1);
    return current.status === 'Pending' ? undefined : current;
  }, 20_000);
  const sums = await ledgerSums(world.h, payout.projectId, 'ETH');
  // Coins arrived: the merchant must have been debited for them, not refunded.
  expect({ rejectRefused, status: after.status, available: sums.available }).toEqual({
    rejectRefused: true,
    status: 'Completed',
    available: '999997.5',
  });
}, 90_000);
