/**
 * Issue 25, docs/treasury.md#utxo: Bitcoin payouts batched in one PSBT transaction, against the
 * Esplora stand-in (real signed transactions, every input's signature verified by the stand-in
 * against its own UTXO set — a stand-in, not a node), the real signer and the real processor
 * process (`main.js process bitcoin`).
 */
import { Transaction } from '@scure/btc-signer';
import { OPERATOR_TOKEN, sleep, waitFor } from './support/harness';
import { activeProcessor, metricsOf, type ProcessorProcess } from './support/treasury';
import { accountAddress, coinAmount, outputsOf, setFeeEstimates, startUtxoTreasuryWorld, waitForBroadcast, type UtxoTreasuryWorld } from './support/utxo-treasury';

let world: UtxoTreasuryWorld;
let processor: ProcessorProcess | undefined;

beforeAll(async () => {
  world = await startUtxoTreasuryWorld('bitcoin', { processorEnv: { PAYOUT_MAX_FEE_RATE_BTC: '50', PAYOUT_CONFIRM_TARGET: '6' } });
}, 120_000);

afterEach(async () => {
  await processor?.kill();
  processor = undefined;
});

afterAll(async () => {
  await world?.dispose();
});

test('three payouts requested together go out in ONE transaction: exact outputs, change to the treasury branch, fee within the cap', async () => {
  setFeeEstimates(world, { 1: 30.5, 3: 20, 6: 12.25, 25: 5, 144: 1.008 });
  const deposit = await world.deposit(1_000_000n);
  const payouts = [
    await world.payout('BTC', '0.0015'),
    await world.payout('BTC', '0.0025'),
    await world.payout('BTC', '0.00031234'),
  ];
  // A batch built before utxo_batches.change_address existed (migration 0810): its change address is
  // filled in at the processor's start, from the account key (docs/treasury.md#house-addresses).
  const [earlier] = await world.h.sql<{ id: string }[]>`
    insert into utxo_batches (network, status, change_index, failure_reason) values ('bitcoin', 'abandoned', 40, 'built before 0810') returning id::text`;
  processor = await world.startProcessor();
  await activeProcessor(processor);
  await waitFor('the earlier batch\'s change address recorded', async () => {
    const [row] = await world.h.sql<{ change_address: string | null }[]>`select change_address from utxo_batches where id = ${earlier!.id}`;
    return row!.change_address !== null;
  });
  expect(await world.h.sql`select change_address from utxo_batches where id = ${earlier!.id}`).toEqual([{ change_address: accountAddress('bitcoin', 1, 40) }]);

  const txid = await waitForBroadcast(world);
  // The batch's change address is recorded from the moment it is built, before its change is a coin:
  // payouts refuse it as a destination from then on.
  expect(await world.h.sql`select change_index, change_address from utxo_batches where id <> ${earlier!.id}`).toEqual([
    { change_index: 1, change_address: accountAddress('bitcoin', 1, 1) },
  ]);
  for (const p of payouts) expect(await world.payoutRow(p.id)).toMatchObject({ status: 'Pending', claimed_by: 'processor:bitcoin', transaction_hash: txid, confirmations: 0 });
  world.esplora.mine();
  await waitFor('one confirmation counted', async () => (await world.payoutRow(payouts[0]!.id)).confirmations === 1);
  expect(await world.events(payouts[0]!.id, 'payout.completed')).toBe(0);
  world.esplora.mine();
  for (const p of payouts) await world.waitForStatus(p.id, 'Completed');

  const [version, ...others] = await world.versions();
  expect(others).toEqual([]);
  expect(version).toMatchObject({ txid, status: 'confirmed' });
  const mined = world.transaction(txid)!;
  // One input: the deposit; exactly four outputs: three payouts (exact base units) and the change.
  expect(mined.prevouts.map((p) => `${p.txid}:${p.vout}`)).toEqual([`${deposit.txid}:${deposit.vout}`]);
  const paid = outputsOf('bitcoin', mined);
  expect(paid.size).toBe(4);
  expect(paid.get(payouts[0]!.address)).toBe(150_000n);
  expect(paid.get(payouts[1]!.address)).toBe(250_000n);
  expect(paid.get(payouts[2]!.address)).toBe(31_234n);
  const change = accountAddress('bitcoin', 1, 1);
  const fee = 1_000_000n - 150_000n - 250_000n - 31_234n - paid.get(change)!;
  expect(BigInt(version!.fee)).toBe(fee);
  // Within the cap (50 sat/vB) and at least the 6-block estimate (12.25 sat/vB) on the real size.
  const vsize = BigInt(mined.tx.virtualSize());
  expect(fee * 1000n).toBeLessThanOrEqual(50_000n * vsize);
  expect(fee * 1000n).toBeGreaterThanOrEqual(12_250n * vsize);
  // RBF signalled on every input.
  expect(mined.tx.ins.every((i) => i.sequence < 0xfffffffe)).toBe(true);
  // The same txid, the PSBT's own (segwit: signatures do not change it).
  expect(Transaction.fromPSBT(Buffer.from(version!.psbt, 'base64')).id).toBe(txid);

  for (const p of payouts) {
    expect(await world.events(p.id, 'payout.completed')).toBe(1);
    expect(await world.payoutRow(p.id)).toMatchObject({ transaction_hash: txid });
  }
  // The change is the treasury's coin now (branch 1); the deposit is spent.
  const coins = await world.h.sql<{ txid: string; branch: number; address_index: number; amount: string; spent: boolean; batch_id: string | null }[]>`
    select txid, branch, address_index, amount::text, spent, batch_id::text from utxo_coins order by id`;
  expect(coins).toEqual([
    { txid: deposit.txid, branch: 0, address_index: 1, amount: '1000000', spent: true, batch_id: version!.batch_id },
    { txid, branch: 1, address_index: 1, amount: paid.get(change)!.toString(), spent: false, batch_id: null },
  ]);
  const transactions = await world.h.sql<{ transaction_hash: string; output_index: number }[]>`select transaction_hash, output_index from payout_transactions order by output_index`;
  expect(transactions).toEqual([0, 1, 2].map((i) => ({ transaction_hash: txid, output_index: i })));
  await sleep(1_000); // more rounds: nothing follows
  expect(world.minedPaying(payouts[0]!.address)).toHaveLength(1);
  expect(await world.events(payouts[0]!.id, 'payout.completed')).toBe(1);
  const metrics = await metricsOf(processor);
  expect(metrics).toContain(`treasury_balance_base_units{network="bitcoin",asset="BTC"} ${paid.get(change)!}`);
  expect(metrics).toContain('payout_processor_fee_cap_waiting{network="bitcoin"} 0');
});

test('the next batch spends the confirmed change; a payout the coins cannot cover waits without holding the others back', async () => {
  setFeeEstimates(world, { 1: 3, 6: 2 });
  const [changeCoin] = await world.h.sql<{ amount: string }[]>`select amount::text from utxo_coins where branch = 1 and not spent`;
  const available = BigInt(changeCoin!.amount);
  const small = await world.payout('BTC', '0.0001');
  const tooBig = await world.payout('BTC', coinAmount(available + 1n));
  processor = await world.startProcessor();
  await activeProcessor(processor);
  const txid = await waitForBroadcast(world);
  world.esplora.mine();
  world.esplora.mine();
  await world.waitForStatus(small.id, 'Completed');
  const mined = world.transaction(txid)!;
  expect(outputsOf('bitcoin', mined).get(small.address)).toBe(10_000n);
  // Change to a fresh address of the branch (account/1/2), never reused.
  expect(outputsOf('bitcoin', mined).has(accountAddress('bitcoin', 1, 2))).toBe(true);
  expect(await world.payoutRow(tooBig.id)).toMatchObject({ status: 'Pending', claimed_by: null, transaction_hash: null });
  // Out of the next tests' way: no longer approved (PAYOUT_AUTO_MAX_BTC is 0), so never claimable.
  await world.h.sql`update payouts set approved_at = null, approved_by = null where id = ${tooBig.id}`;
});

test('the Treasury page shows the treasury address (account/1/0), its balance (available coins) and payouts in flight with confirmations', async () => {
  setFeeEstimates(world, { 6: 2 });
  await world.deposit(500_000n);
  const payout = await world.payout('BTC', '0.001');
  processor = await world.startProcessor();
  await activeProcessor(processor);
  const txid = await waitForBroadcast(world);
  world.esplora.mine();
  await waitFor('one confirmation', async () => (await world.payoutRow(payout.id)).confirmations === 1);
  const { networks } = await world.h.client.getTreasury({ operatorToken: OPERATOR_TOKEN });
  const bitcoin = networks.find((n) => n.network === 'bitcoin')!;
  expect(bitcoin.address).toBe(accountAddress('bitcoin', 1, 0));
  const [available] = await world.h.sql<{ total: string }[]>`select coalesce(sum(amount), 0)::text as total from utxo_coins where network = 'bitcoin' and batch_id is null and not spent`;
  expect(bitcoin.balances).toEqual([expect.objectContaining({ asset: 'BTC', amount: coinAmount(BigInt(available!.total)) })]);
  expect(bitcoin.inFlight.map((p) => ({ id: p.id, transactionHash: p.transactionHash, confirmations: p.confirmations }))).toEqual([{ id: payout.id, transactionHash: txid, confirmations: 1 }]);
  world.esplora.mine();
  await world.waitForStatus(payout.id, 'Completed');
});

test('PAYOUT_BATCH_WAIT gathers payouts approved a moment apart; a full batch (PAYOUT_BATCH_MAX) goes at once; a lone payout waits its turn', async () => {
  setFeeEstimates(world, { 6: 2 });
  await world.deposit(900_000n);
  await world.deposit(900_000n);
  processor = await world.startProcessor({ PAYOUT_BATCH_WAIT: '3s', PAYOUT_BATCH_MAX: '2' });
  await activeProcessor(processor);
  // Requested first, approved (made claimable) 0.8 s apart, however slow the requests are.
  const first = await world.payout('BTC', '0.0001', { approve: false });
  const second = await world.payout('BTC', '0.0002', { approve: false });
  await world.approve(first.id);
  await sleep(800);
  await world.approve(second.id);
  // Two claimable payouts fill the batch: it goes before the first has waited 3 s.
  const pair = await waitFor('the full batch', async () => (await world.payoutRow(second.id)).transaction_hash ?? undefined, 2_500);
  expect((await world.payoutRow(first.id)).transaction_hash).toBe(pair);
  const lone = await world.payout('BTC', '0.0003', { approve: false });
  await world.approve(lone.id);
  await sleep(1_500);
  expect(await world.payoutRow(lone.id)).toMatchObject({ claimed_by: null, transaction_hash: null });
  const alone = await waitFor('the lone payout after PAYOUT_BATCH_WAIT', async () => (await world.payoutRow(lone.id)).transaction_hash ?? undefined, 10_000);
  expect(alone).not.toBe(pair);
  const [waited] = await world.h.sql<{ ms: number }[]>`
    select (extract(epoch from b.created_at - p.approved_at) * 1000)::float8 as ms
    from utxo_batch_payouts bp join utxo_batches b on b.id = bp.batch_id join payouts p on p.id = bp.payout_id where bp.payout_id = ${lone.id}`;
  expect(waited!.ms).toBeGreaterThanOrEqual(3_000);
  await waitFor('both in the mempool', async () => world.esplora.mempool.has(pair) && world.esplora.mempool.has(alone));
  world.esplora.mine();
  world.esplora.mine();
  for (const p of [first, second, lone]) await world.waitForStatus(p.id, 'Completed');
  expect(outputsOf('bitcoin', world.transaction(pair)!).get(second.address)).toBe(20_000n);
  expect(outputsOf('bitcoin', world.transaction(alone)!).get(lone.address)).toBe(30_000n);
});

test('a whole batch of payouts the coins cannot cover does not hold back the payout after them (docs/treasury.md#payouts-that-cannot-go-yet)', async () => {
  setFeeEstimates(world, { 6: 2 });
  await world.deposit(500_000n);
  // The two oldest claimable payouts, a batch's worth (PAYOUT_BATCH_MAX 2), each more than every coin.
  const uncovered = [await world.payout('BTC', '21'), await world.payout('BTC', '21')];
  try {
    const coverable = await world.payout('BTC', '0.0004');
    processor = await world.startProcessor({ PAYOUT_BATCH_MAX: '2' });
    await activeProcessor(processor);
    const txid = await waitFor('the payout after them broadcast', async () => (await world.payoutRow(coverable.id)).transaction_hash ?? undefined, 20_000);
    // The batch's txid is stored before its broadcast (docs/treasury.md#utxo): wait for the stand-in to hold it.
    await waitFor('the payout after them in the mempool', async () => world.esplora.mempool.has(txid));
    expect(outputsOf('bitcoin', world.transaction(txid)!).get(coverable.address)).toBe(40_000n);
    for (const { id } of uncovered) expect(await world.payoutRow(id)).toMatchObject({ status: 'Pending', claimed_by: null, transaction_hash: null });
    world.esplora.mine();
    world.esplora.mine();
    await world.waitForStatus(coverable.id, 'Completed');
  } finally {
    // Out of the next tests' way: no longer approved (PAYOUT_AUTO_MAX_BTC is 0), so never claimable.
    await world.h.sql`update payouts set approved_at = null, approved_by = null where id in ${world.h.sql(uncovered.map((p) => p.id))}`;
  }
});

test('payouts waiting for coins keep their place: the change that comes back pays them before newer ones (docs/treasury.md#payouts-that-cannot-go-yet)', async () => {
  setFeeEstimates(world, { 6: 2 });
  const coinsTotal = async () => BigInt((await world.h.sql<{ total: string }[]>`select coalesce(sum(amount), 0)::text as total from utxo_coins where network = 'bitcoin' and batch_id is null and not spent`)[0]!.total);
  const before = await coinsTotal();
  await world.deposit(500_000n);
  processor = await world.startProcessor({ PAYOUT_BATCH_MAX: '2' });
  await activeProcessor(processor);
  const total = await waitFor('the deposit taken in as a coin', async () => {
    const now = await coinsTotal();
    return now >= before + 500_000n ? now : undefined;
  });
  // The first payout takes every coin but 150,000 sat: its change pays the next two 0.0005-BTC payouts, not four.
  const first = await world.payout('BTC', coinAmount(total - 150_000n));
  const firstTxid = await waitFor('the first payout broadcast', async () => (await world.payoutRow(first.id)).transaction_hash ?? undefined, 20_000);
  // Every coin is in the first batch until its change confirms: these two wait.
  const older = [await world.payout('BTC', '0.0005'), await world.payout('BTC', '0.0005')];
  await sleep(2_500);
  for (const { id } of older) expect(await world.payoutRow(id)).toMatchObject({ claimed_by: null, transaction_hash: null });
  await waitFor('the first payout in the mempool', async () => world.esplora.mempool.has(firstTxid));
  world.esplora.mine();
  world.esplora.mine();
  await world.waitForStatus(first.id, 'Completed');
  const newer = [await world.payout('BTC', '0.0005'), await world.payout('BTC', '0.0005')];
  const txid = await waitFor('the older two broadcast', async () => (await world.payoutRow(older[0]!.id)).transaction_hash ?? undefined, 20_000);
  expect((await world.payoutRow(older[1]!.id)).transaction_hash).toBe(txid);
  // The change is spent by them: the newer ones wait for the next coins.
  for (const { id } of newer) expect(await world.payoutRow(id)).toMatchObject({ claimed_by: null, transaction_hash: null });
  await waitFor('the older two in the mempool', async () => world.esplora.mempool.has(txid));
  world.esplora.mine();
  world.esplora.mine();
  for (const { id } of older) await world.waitForStatus(id, 'Completed', 30_000);
  // Out of the next tests' way: no longer approved (PAYOUT_AUTO_MAX_BTC is 0), so never claimable.
  await world.h.sql`update payouts set approved_at = null, approved_by = null where id in ${world.h.sql(newer.map((p) => p.id))}`;
});

test('a processor started while the signer is down follows its batch in flight to Completed with the treasury (address and account key) the signer answered before', async () => {
  setFeeEstimates(world, { 6: 2 });
  await world.deposit(400_000n);
  processor = await world.startProcessor();
  await activeProcessor(processor);
  const payout = await world.payout('BTC', '0.001');
  const txid = await waitFor('the payout broadcast', async () => (await world.payoutRow(payout.id)).transaction_hash ?? undefined, 20_000);
  await waitFor('the payout in the mempool', async () => world.esplora.mempool.has(txid));
  await processor.kill();
  await world.signer.kill();
  try {
    processor = await world.startProcessor();
    await activeProcessor(processor);
    await waitFor('the processor says it goes on without the signer', async () => processor!.logs.some((line) => line.includes('the signer cannot be reached')));
    world.esplora.mine();
    world.esplora.mine();
    await world.waitForStatus(payout.id, 'Completed', 30_000);
    expect(await world.payoutRow(payout.id)).toMatchObject({ transaction_hash: txid });
  } finally {
    await world.signer.restart();
  }
}, 120_000);
