/**
 * Issue 23, docs/treasury.md#processor (sweeps): the processor moves accounted deposits (sweep_tasks rows,
 * inserted here as the intake would) from their deposit addresses (account/0/index) to the treasury:
 * ETH as balance less gas, tokens after an exact gas top-up from the treasury; dust is left with its
 * reason; a sweep killed midway resumes from what the rows say. Prints the gas each sweep costs.
 */
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { parseEther, type Address } from 'viem';
import { tokenUnits } from '../../../test/support/anvil';
import { waitFor } from './support/harness';
import { activeProcessor, depositAddress, fundDeposit, insertSweepTask, metricsOf, mineBlocks, startTreasuryWorld, type ProcessorProcess, type TreasuryWorld } from './support/treasury';

let world: TreasuryWorld;
let processor: ProcessorProcess | undefined;

beforeAll(async () => {
  world = await startTreasuryWorld();
}, 120_000);

afterEach(async () => {
  await processor?.kill();
  processor = undefined;
  world.rpc.sendFault = 'none';
});

afterAll(async () => {
  await world?.dispose();
});

const ERC20_BALANCE = [{ type: 'function', name: 'balanceOf', stateMutability: 'view', inputs: [{ type: 'address' }], outputs: [{ type: 'uint256' }] }] as const;

async function tokenBalance(token: Address, address: Address): Promise<bigint> {
  return world.anvil.publicClient.readContract({ address: token, abi: ERC20_BALANCE, functionName: 'balanceOf', args: [address] });
}

interface TaskView {
  id: string;
  status: string;
  skip_reason: string | null;
  transaction_id: string | null;
  gas_top_up_transaction_id: string | null;
}

async function task(id: string): Promise<TaskView> {
  const [row] = await world.h.sql<TaskView[]>`select id::text, status, skip_reason, transaction_id::text, gas_top_up_transaction_id::text from sweep_tasks where id = ${id}`;
  return row!;
}

async function waitForTask(id: string, status: string, timeoutMs = 30_000): Promise<TaskView> {
  return waitFor(`sweep task ${id} ${status}`, async () => {
    const row = await task(id);
    return row.status === status ? row : undefined;
  }, timeoutMs);
}

async function transaction(id: string) {
  const [row] = await world.h.sql<{ purpose: string; status: string; amount: string; gas_used: string | null; effective_gas_price: string | null; gas_limit: string; max_fee_per_gas: string; to_address: string; from_address: string; transaction_hash: string }[]>`
    select purpose, status, amount::text, gas_used::text, effective_gas_price::text, gas_limit::text, max_fee_per_gas::text, to_address, from_address, transaction_hash
    from chain_transactions where id = ${id}`;
  return row!;
}

async function start(): Promise<ProcessorProcess> {
  processor = await world.startProcessor();
  await activeProcessor(processor);
  return processor;
}

test('ETH deposits are swept to the treasury (balance less gas); one below SWEEP_DUST_ETH is left with the reason', async () => {
  await fundDeposit(world, 'ETH', depositAddress(0), '1.5');
  await fundDeposit(world, 'ETH', depositAddress(1), '2.25');
  await fundDeposit(world, 'ETH', depositAddress(2), '0.0005');
  const treasuryBefore = await world.anvil.publicClient.getBalance({ address: world.treasury });
  const tasks = [
    await insertSweepTask(world, { asset: 'ETH', index: 0, amount: parseEther('1.5') }),
    await insertSweepTask(world, { asset: 'ETH', index: 1, amount: parseEther('2.25') }),
  ];
  const dust = await insertSweepTask(world, { asset: 'ETH', index: 2, amount: parseEther('0.0005') });
  await start();

  let swept = 0n;
  for (const [i, id] of tasks.entries()) {
    const done = await waitForTask(id, 'confirmed');
    const sweep = await transaction(done.transaction_id!);
    expect(sweep).toMatchObject({ purpose: 'sweep', status: 'confirmed', from_address: depositAddress(i).toLowerCase(), to_address: world.treasury.toLowerCase() });
    swept += BigInt(sweep.amount);
    // What stays is the unused part of the gas reserved at the max fee (EIP-1559 charges the effective price).
    const left = await world.anvil.publicClient.getBalance({ address: depositAddress(i) });
    expect(left).toBeLessThan(BigInt(sweep.gas_limit) * BigInt(sweep.max_fee_per_gas));
    expect(left + BigInt(sweep.amount) + BigInt(sweep.gas_used!) * BigInt(sweep.effective_gas_price!)).toBe(parseEther(i === 0 ? '1.5' : '2.25'));
    console.log(`gas per ETH sweep: ${sweep.gas_used} gas (left at the deposit address: ${left} wei)`);
  }
  expect(await world.anvil.publicClient.getBalance({ address: world.treasury })).toBe(treasuryBefore + swept);
  const skipped = await waitForTask(dust, 'skipped_dust');
  expect(skipped.skip_reason).toMatch(/^balance 500000000000000 wei less the sweep's gas \(at most \d+ wei\) is \d+ wei, below SWEEP_DUST_ETH \(1000000000000000 wei\)$/);
  expect(await world.anvil.publicClient.getBalance({ address: depositAddress(2) })).toBe(parseEther('0.0005'));
  const text = await metricsOf(processor!);
  expect(text).toContain('sweep_tasks{network="ethereum",status="skipped_dust"} 1');
});

test('a sweep takes only what the deposit address held at the confirmation count: money still unconfirmed stays where it is (docs/treasury.md#sweep-tasks)', async () => {
  const index = 40;
  await fundDeposit(world, 'ETH', depositAddress(index), '1');
  await fundDeposit(world, 'USDT', depositAddress(index + 1), '100');
  await mineBlocks(world, 10);
  // Then more arrives, mined in the head block: 1 confirmation of the 10 the processor waits for
  // (the token's top-up and the ETH sweep add a few blocks meanwhile, never 10).
  await fundDeposit(world, 'ETH', depositAddress(index), '0.4');
  await fundDeposit(world, 'USDT', depositAddress(index + 1), '55');
  const eth = await insertSweepTask(world, { asset: 'ETH', index, amount: parseEther('1') });
  const usdt = await insertSweepTask(world, { asset: 'USDT', index: index + 1, amount: tokenUnits('100') });
  processor = await world.startProcessor({ CHAIN_ETHEREUM_CONFIRMATIONS: '10' });
  await activeProcessor(processor);

  const ethSweep = await transaction((await waitForTask(eth, 'sent')).transaction_id!);
  // At most the confirmed 1 ETH less the gas reserved: the 0.4 is not in it (it was 1.4 less gas).
  expect(BigInt(ethSweep.amount) + BigInt(ethSweep.gas_limit) * BigInt(ethSweep.max_fee_per_gas)).toBe(parseEther('1'));
  const usdtSweep = await transaction((await waitForTask(usdt, 'sent')).transaction_id!);
  expect(BigInt(usdtSweep.amount)).toBe(tokenUnits('100'));
  await mineBlocks(world, 10);
  await waitForTask(eth, 'confirmed');
  await waitForTask(usdt, 'confirmed');
  expect(await world.anvil.publicClient.getBalance({ address: depositAddress(index) })).toBeGreaterThanOrEqual(parseEther('0.4'));
  expect(await tokenBalance(world.tokens.usdt, depositAddress(index + 1))).toBe(tokenUnits('55'));
});

test('a confirmed ETH sweep a deep reorg took off the chain, with nothing sent after it: found by the scan of the last day\'s senders (at start, then every 5 minutes), sent again, an incident', async () => {
  await fundDeposit(world, 'ETH', depositAddress(7), '1.5');
  const snapshot = await world.anvil.testClient.snapshot();
  const id = await insertSweepTask(world, { asset: 'ETH', index: 7, amount: parseEther('1.5') });
  await start();
  const done = await waitForTask(id, 'confirmed');
  const sweep = await transaction(done.transaction_id!);
  await processor!.kill();
  // Deeper than the confirmations: the sweep leaves the chain; the deposit holds its coins again.
  await world.anvil.testClient.revert({ id: snapshot });
  await mineBlocks(world, 3);
  expect(await world.anvil.publicClient.getBalance({ address: depositAddress(7) })).toBe(parseEther('1.5'));
  // A second review found this silent: no transfer after it is held up, so no nonce gap shows it.
  await start();
  await waitFor('the sweep mined again', async () => (await world.anvil.publicClient.getBalance({ address: depositAddress(7) })) < parseEther('1.5'), 30_000);
  expect(await world.anvil.publicClient.getTransaction({ hash: sweep.transaction_hash as `0x${string}` })).toMatchObject({ hash: sweep.transaction_hash });
  expect(processor!.logs.some((l) => l.includes('INCIDENT: a transaction recorded confirmed is no longer on the chain'))).toBe(true);
  expect(await metricsOf(processor!)).toContain('payout_processor_nonce_resyncs_total{network="ethereum",outcome="lost_rebroadcast"} 1');
  expect((await waitForTask(id, 'confirmed')).transaction_id).toBe(done.transaction_id);
});

test('token deposits: an exact gas top-up from the treasury, then transfer(treasury, balance); two deposits of one address are one sweep', async () => {
  const usdtBefore = await tokenBalance(world.tokens.usdt, world.treasury);
  const usdcBefore = await tokenBalance(world.tokens.usdc, world.treasury);
  await fundDeposit(world, 'USDT', depositAddress(3), '150');
  await fundDeposit(world, 'USDC', depositAddress(4), '30');
  await fundDeposit(world, 'USDC', depositAddress(4), '20');
  const usdt = await insertSweepTask(world, { asset: 'USDT', index: 3, amount: tokenUnits('150') });
  const usdc = [await insertSweepTask(world, { asset: 'USDC', index: 4, amount: tokenUnits('30') }), await insertSweepTask(world, { asset: 'USDC', index: 4, amount: tokenUnits('20') })];
  await start();

  const done = await waitForTask(usdt, 'confirmed');
  const topUp = await transaction(done.gas_top_up_transaction_id!);
  const sweep = await transaction(done.transaction_id!);
  expect(topUp).toMatchObject({ purpose: 'gas_top_up', status: 'confirmed', from_address: world.treasury.toLowerCase(), to_address: depositAddress(3).toLowerCase() });
  // Exactly gas × max fee less what the address held (nothing).
  expect(BigInt(topUp.amount)).toBe(BigInt(sweep.gas_limit) * BigInt(sweep.max_fee_per_gas));
  expect(sweep).toMatchObject({ purpose: 'sweep', status: 'confirmed', amount: tokenUnits('150').toString() });
  expect(await tokenBalance(world.tokens.usdt, depositAddress(3))).toBe(0n);
  expect(await tokenBalance(world.tokens.usdt, world.treasury)).toBe(usdtBefore + tokenUnits('150'));
  const ethLeft = await world.anvil.publicClient.getBalance({ address: depositAddress(3) });
  expect(ethLeft).toBeLessThan(BigInt(topUp.amount));
  console.log(`gas per ERC-20 sweep with its top-up: ${BigInt(topUp.gas_used!) + BigInt(sweep.gas_used!)} gas (top-up ${topUp.gas_used} + token transfer ${sweep.gas_used}); ETH left at the deposit address: ${ethLeft} wei`);

  const [first, second] = [await waitForTask(usdc[0]!, 'confirmed'), await waitForTask(usdc[1]!, 'confirmed')];
  expect(first.transaction_id).toBe(second.transaction_id);
  expect(await transaction(first.transaction_id!)).toMatchObject({ amount: tokenUnits('50').toString() });
  expect(await tokenBalance(world.tokens.usdc, depositAddress(4))).toBe(0n);
  expect(await tokenBalance(world.tokens.usdc, world.treasury)).toBe(usdcBefore + tokenUnits('50'));
});

test('a token sweep killed after its top-up (and again before the sweep\'s broadcast) resumes where the rows say: one top-up, one sweep', async () => {
  const usdtBefore = await tokenBalance(world.tokens.usdt, world.treasury);
  await fundDeposit(world, 'USDT', depositAddress(5), '75');
  const id = await insertSweepTask(world, { asset: 'USDT', index: 5, amount: tokenUnits('75') });

  // The top-up reaches the node (mined) but its answer never comes back: killed there.
  world.rpc.sendFault = 'forward_no_answer';
  await start();
  await waitFor('the top-up broadcast', async () => (await world.anvil.publicClient.getBalance({ address: depositAddress(5) })) > 0n);
  await processor!.kill();
  expect(await task(id)).toMatchObject({ status: 'pending', transaction_id: null });

  // Restarted: the top-up is recorded, the sweep signed and stored — its broadcast held: killed again.
  world.rpc.sendFault = 'hold';
  const held = world.rpc.heldSends.length;
  await start();
  await waitFor('the sweep signed', async () => (await task(id)).status === 'sent');
  await waitFor('its broadcast held', async () => world.rpc.heldSends.length > held);
  await processor!.kill();
  expect(await tokenBalance(world.tokens.usdt, depositAddress(5))).toBe(tokenUnits('75'));

  world.rpc.sendFault = 'none';
  await start();
  const done = await waitForTask(id, 'confirmed');
  expect(await tokenBalance(world.tokens.usdt, depositAddress(5))).toBe(0n);
  expect(await tokenBalance(world.tokens.usdt, world.treasury)).toBe(usdtBefore + tokenUnits('75'));
  const rows = await world.h.sql<{ purpose: string; status: string }[]>`
    select purpose, status from chain_transactions where (purpose = 'gas_top_up' and to_address = ${depositAddress(5).toLowerCase()}) or (purpose = 'sweep' and from_address = ${depositAddress(5).toLowerCase()}) order by id`;
  expect(rows).toEqual([{ purpose: 'gas_top_up', status: 'confirmed' }, { purpose: 'sweep', status: 'confirmed' }]);
  expect(done.gas_top_up_transaction_id).not.toBeNull();
});

test('a sweep not mined within PAYOUT_REPLACE_AFTER is replaced: same nonce, higher fee, less ETH sent (balance less the new gas), the tasks follow the new version', async () => {
  await fundDeposit(world, 'ETH', depositAddress(6), '0.9');
  const id = await insertSweepTask(world, { asset: 'ETH', index: 6, amount: parseEther('0.9') });
  const treasuryBefore = await world.anvil.publicClient.getBalance({ address: world.treasury });
  await world.anvil.testClient.setAutomine(false);
  try {
    processor = await world.startProcessor({ PAYOUT_REPLACE_AFTER: '2s' });
    await activeProcessor(processor);
    // Broadcast, not only signed and stored: mined before the node has it, the block would hold the
    // original (the task then rightly follows the original; CI once caught that race).
    const replacement = await waitFor('the replacement, broadcast', async () => {
      const [row] = await world.h.sql<{ id: string; replaces: string | null; amount: string; max_fee_per_gas: string }[]>`
        select id::text, replaces::text, amount::text, max_fee_per_gas::text from chain_transactions
        where purpose = 'sweep' and from_address = ${depositAddress(6).toLowerCase()} and replaces is not null and status = 'broadcast'`;
      return row;
    }, 20_000);
    const first = await transaction(replacement.replaces!);
    expect(BigInt(replacement.max_fee_per_gas) * 1000n).toBeGreaterThanOrEqual(BigInt(first.max_fee_per_gas) * 1125n);
    expect(BigInt(first.amount) - BigInt(replacement.amount)).toBe(21_000n * (BigInt(replacement.max_fee_per_gas) - BigInt(first.max_fee_per_gas)));
    expect((await task(id)).transaction_id).toBe(replacement.id);
    await world.anvil.testClient.setAutomine(true);
    await world.anvil.testClient.mine({ blocks: 1 });
    const done = await waitForTask(id, 'confirmed');
    expect(done.transaction_id).toBe(replacement.id);
    expect(await transaction(replacement.replaces!)).toMatchObject({ status: 'replaced' });
    expect(await world.anvil.publicClient.getBalance({ address: world.treasury })).toBe(treasuryBefore + BigInt(replacement.amount));
  } finally {
    await world.anvil.testClient.setAutomine(true);
  }
});

test('the intake: a deposit the invoice service reports as accounted becomes one sweep task (once, however often it is re-read) and is swept', async () => {
  await fundDeposit(world, 'ETH', depositAddress(7), '0.7');
  const paymentId = `ethereum:0x${'7a'.repeat(32)}:0`;
  world.invoice.deposits.push({
    paymentId,
    invoiceId: crypto.randomUUID(),
    projectId: crypto.randomUUID(),
    chain: 'ethereum',
    address: depositAddress(7),
    addressIndex: 7,
    asset: 'ETH',
    amount: '0.7',
    reportedAt: timestampNow(),
    rowId: 1n,
  });
  await start();
  const [created] = await waitFor('the sweep task', async () => {
    const rows = await world.h.sql<{ id: string; amount: string; address_index: number }[]>`select id::text, amount::text, address_index from sweep_tasks where payment_id = ${paymentId}`;
    return rows.length > 0 ? rows : undefined;
  });
  expect(created).toMatchObject({ amount: parseEther('0.7').toString(), address_index: 7 });
  const done = await waitForTask(created!.id, 'confirmed');
  expect(BigInt((await transaction(done.transaction_id!)).amount)).toBeGreaterThan(parseEther('0.69'));
  expect(await world.h.sql`select 1 from sweep_tasks where payment_id = ${paymentId}`).toHaveLength(1);
});
