/**
 * Rule (docs/treasury.md#nonce-drift, services/payout/README.md "Processor"): a transaction from a
 * processor address that the processor did not make — an operator moving the hot wallet's excess to
 * cold storage with the seed — does not wedge its payouts.
 * - Each round the processor reads the treasury's nonce from the chain and moves evm_accounts'
 *   next_nonce up to it (never down): later payouts take the next free nonce.
 * - A payout already signed for a nonce that such a transaction took (no version of ours mined and
 *   the chain's nonce at final depth past it) can never be mined, and the signer signs a payout for
 *   one nonce only: its row fails with the reason, the payout is Rejected (hold released) saying so.
 */
import { parseEther } from 'viem';
import { waitFor } from './support/harness';
import { activeProcessor, freshAddress, metricsOf, startTreasuryWorld, type ProcessorProcess, type TreasuryWorld } from './support/treasury';

let world: TreasuryWorld;
let processor: ProcessorProcess;

beforeAll(async () => {
  world = await startTreasuryWorld();
  processor = await world.startProcessor();
  await activeProcessor(processor);
  await waitFor('the treasury nonce row', async () => (await world.h.sql`select 1 from evm_accounts where address = ${world.treasury.toLowerCase()}`).length === 1, 20_000);
}, 120_000);

afterAll(async () => {
  await world?.dispose();
});

test('a transfer from the treasury key made outside the processor does not wedge its payouts', async () => {
  // The operator moves 1 ETH from the hot treasury to cold storage with the seed.
  await world.anvil.testClient.impersonateAccount({ address: world.treasury });
  const hash = await world.anvil.wallet.sendTransaction({ account: world.treasury, to: freshAddress(), value: parseEther('1'), chain: world.anvil.wallet.chain });
  await world.anvil.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  await world.anvil.testClient.stopImpersonatingAccount({ address: world.treasury });

  const payout = await world.payout('ETH', '0.2');
  const done = await waitFor('the payout settled', async () => {
    const row = await world.payoutRow(payout.id);
    return row.status !== 'Pending' ? row : undefined;
  }, 20_000).catch(() => undefined);
  const rows = await world.chainTransactions(payout.id);
  expect(done).toMatchObject({ status: 'Completed' });
  expect(rows.map((r) => ({ status: r.status, nonce: Number(r.nonce) }))).toEqual([{ status: 'confirmed', nonce: (await world.anvil.publicClient.getTransactionCount({ address: world.treasury })) - 1 }]);
  expect(processor.logs.filter((l) => l.includes('next nonce moved up to the chain')).length).toBe(1);
  expect(await metricsOf(processor)).toMatch(/payout_processor_nonce_resyncs_total\{network="ethereum",outcome="next_moved"\} 1\b/);
}, 90_000);

test('a payout signed for a nonce that an outside transaction took is rejected with the reason, and the next one is paid', async () => {
  // Blocks only on demand: the payout's transaction waits in the node's pool.
  await world.anvil.testClient.setAutomine(false);
  try {
    const payout = await world.payout('ETH', '0.15');
    const [ours] = await waitFor('the payout broadcast', async () => {
      const rows = await world.chainTransactions(payout.id);
      return rows.length === 1 && rows[0]!.status === 'broadcast' ? rows : undefined;
    }, 20_000);
    // The operator's transfer with the seed takes the same nonce with a higher fee: it replaces ours in the pool.
    await world.anvil.testClient.impersonateAccount({ address: world.treasury });
    await world.anvil.wallet.sendTransaction({
      account: world.treasury,
      to: freshAddress(),
      value: parseEther('0.5'),
      nonce: Number(ours!.nonce),
      maxFeePerGas: BigInt(ours!.max_fee_per_gas) * 3n,
      maxPriorityFeePerGas: BigInt(ours!.max_priority_fee_per_gas) * 3n,
      chain: world.anvil.wallet.chain,
    });
    await world.anvil.testClient.stopImpersonatingAccount({ address: world.treasury });
    await world.anvil.testClient.mine({ blocks: 1 });
    await world.anvil.testClient.setAutomine(true);

    const rejected = await waitFor('the payout rejected', async () => {
      const row = await world.payoutRow(payout.id);
      return row.status !== 'Pending' ? row : undefined;
    }, 20_000);
    expect(rejected.status).toBe('Rejected');
    expect(rejected.admin_note).toMatch(new RegExp(`nonce ${ours!.nonce} was used by a transaction the processor did not make`));
    const rows = await world.chainTransactions(payout.id);
    expect(rows.map((r) => r.status)).toEqual(['failed']);
    expect(rows[0]!.failure_reason).toMatch(/can never be mined/);
    expect(await metricsOf(processor)).toMatch(/payout_processor_nonce_resyncs_total\{network="ethereum",outcome="superseded"\} 1\b/);

    // The next payout takes the next free nonce and is paid.
    const next = await world.payout('ETH', '0.05');
    await waitFor('the next payout completed', async () => (await world.payoutRow(next.id)).status === 'Completed', 20_000);
  } finally {
    await world.anvil.testClient.setAutomine(true);
  }
}, 90_000);
