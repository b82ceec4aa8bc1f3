/**
 * Issue 23, docs/treasury.md#processor: a payout leaves exactly once whatever moment the processor
 * dies at. No fault hooks in the processor: a JSON-RPC proxy between it and anvil holds
 * eth_sendRawTransaction (never forwarded, or forwarded with the answer lost), a TCP proxy holds
 * the signer's answer, the processor is SIGKILLed and started again; anvil's snapshots make a
 * reorg, its automine switch a stuck transaction that must be replaced.
 */
import { parseEther, type Address } from 'viem';
import { tokenUnits } from '../../../test/support/anvil';
import { sleep, waitFor } from './support/harness';
import { activeProcessor, metricsOf, mineBlocks, startTreasuryWorld, type ProcessorProcess, type TreasuryWorld } from './support/treasury';

let world: TreasuryWorld;
let processor: ProcessorProcess | undefined;

beforeAll(async () => {
  world = await startTreasuryWorld();
}, 120_000);

afterEach(async () => {
  await processor?.kill();
  processor = undefined;
  world.rpc.sendFault = 'none';
  world.signerLink.release();
});

afterAll(async () => {
  await world?.dispose();
});

async function start(env: NodeJS.ProcessEnv = {}): Promise<ProcessorProcess> {
  processor = await world.startProcessor(env);
  await activeProcessor(processor);
  return processor;
}

/** Exactly one transfer of `amount` reached `address`, and the payout completed once with its hash. */
async function expectPaidOnce(payout: { id: string; address: Address }, currency: 'ETH' | 'USDT', amount: string): Promise<void> {
  const done = await world.waitForStatus(payout.id, 'Completed', 60_000);
  await sleep(1_000); // more rounds: nothing may follow
  if (currency === 'ETH') expect(await world.anvil.publicClient.getBalance({ address: payout.address })).toBe(parseEther(amount));
  else expect(await world.transfersTo('USDT', payout.address)).toEqual([{ value: tokenUnits(amount), transactionHash: done.transaction_hash }]);
  expect(await world.events(payout.id, 'payout.completed')).toBe(1);
  const rows = await world.chainTransactions(payout.id);
  const confirmed = rows.filter((r) => r.status === 'confirmed');
  expect(confirmed).toHaveLength(1);
  expect(rows.filter((r) => r.status !== 'confirmed').every((r) => r.status === 'replaced')).toBe(true);
  expect(new Set(rows.map((r) => r.nonce)).size).toBe(1);
  expect((await world.payoutRow(payout.id)).transaction_hash).toBe(confirmed[0]!.transaction_hash);
}

test('(a) killed after signing, before the broadcast reached the node: the stored bytes are broadcast after the restart', async () => {
  await start();
  world.rpc.sendFault = 'hold';
  const held = world.rpc.heldSends.length;
  const payout = await world.payout('ETH', '1.5');
  await waitFor('the broadcast to be held', async () => world.rpc.heldSends.length > held);
  await processor!.kill();

  const [row] = await world.chainTransactions(payout.id);
  expect(row).toMatchObject({ status: 'signed' });
  expect(await world.anvil.publicClient.getTransaction({ hash: row!.transaction_hash as `0x${string}` }).catch(() => null)).toBeNull();
  expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending', claimed_by: 'processor:ethereum', transaction_hash: row!.transaction_hash });

  world.rpc.sendFault = 'none';
  await start();
  await expectPaidOnce(payout, 'ETH', '1.5');
  expect((await world.chainTransactions(payout.id))[0]!.transaction_hash).toBe(row!.transaction_hash);
  expect(await world.signer.payoutSignatures(payout.id)).toHaveLength(1);
});

test('(b) killed after the broadcast reached the node, before it was recorded: the node already has it, nothing is sent twice', async () => {
  await start();
  world.rpc.sendFault = 'forward_no_answer';
  const held = world.rpc.heldSends.length;
  const payout = await world.payout('USDT', '40');
  await waitFor('the broadcast to be forwarded and its answer held', async () => world.rpc.heldSends.length > held);
  const [row] = await world.chainTransactions(payout.id);
  // anvil mines at once: the transfer is on chain while the row still says `signed`.
  await waitFor('the transfer mined', async () => (await world.transfersTo('USDT', payout.address)).length === 1);
  await processor!.kill();
  expect((await world.chainTransactions(payout.id))[0]).toMatchObject({ status: 'signed', transaction_hash: row!.transaction_hash });

  world.rpc.sendFault = 'none';
  await start();
  await expectPaidOnce(payout, 'USDT', '40');
});

test('(c) killed while waiting for confirmations: the restarted processor counts on and completes once', async () => {
  const env = { CHAIN_ETHEREUM_CONFIRMATIONS: '3' };
  await start(env);
  const payout = await world.payout('ETH', '2.25');
  await waitFor('one confirmation', async () => (await world.payoutRow(payout.id)).confirmations === 1);
  const metrics = await waitFor('the in-flight gauges', async () => {
    const text = await metricsOf(processor!);
    return text.includes('payouts_in_flight{network="ethereum"} 1') ? text : undefined;
  });
  expect(Number(/payout_in_flight_oldest_seconds\{network="ethereum"\} ([\d.e-]+)/.exec(metrics)?.[1])).toBeGreaterThan(0);
  await processor!.kill();
  await mineBlocks(world, 1);

  await start(env);
  await waitFor('two confirmations', async () => (await world.payoutRow(payout.id)).confirmations === 2);
  expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending' });
  expect(await world.events(payout.id, 'payout.completed')).toBe(0);
  await mineBlocks(world, 1);
  await expectPaidOnce(payout, 'ETH', '2.25');
  expect((await world.payoutRow(payout.id)).confirmations).toBeGreaterThanOrEqual(3);
});

test('a reorg that drops the mined transfer does not complete the payout: the stored bytes are broadcast again', async () => {
  const env = { CHAIN_ETHEREUM_CONFIRMATIONS: '3' };
  await start(env);
  const snapshot = await world.anvil.testClient.snapshot();
  const payout = await world.payout('ETH', '0.8');
  await waitFor('one confirmation', async () => (await world.payoutRow(payout.id)).confirmations === 1);
  const [before] = await world.chainTransactions(payout.id);
  expect(before).toMatchObject({ status: 'mined' });

  // The block holding the transfer leaves the chain; anvil's pool forgets it too.
  await world.anvil.testClient.revert({ id: snapshot });
  expect(await world.anvil.publicClient.getBalance({ address: payout.address })).toBe(0n);
  await waitFor('the reorg noticed', async () => processor!.logs.some((l) => l.includes('left the chain (reorg)')));
  // Broadcast again (anvil mines it at once): one confirmation again, never completed early.
  await waitFor('mined again', async () => (await world.anvil.publicClient.getBalance({ address: payout.address })) === parseEther('0.8'));
  expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending' });
  await mineBlocks(world, 2);
  await expectPaidOnce(payout, 'ETH', '0.8');
  expect((await world.chainTransactions(payout.id))[0]!.transaction_hash).toBe(before!.transaction_hash);
});

test('a reorg deeper than the confirmations drops a Completed payout\'s transfer: its stored bytes are sent again (an incident), and the next payout is not stuck behind the gap', async () => {
  await start();
  const snapshot = await world.anvil.testClient.snapshot();
  const lost = await world.payout('ETH', '0.3');
  await mineBlocks(world, 1);
  const done = await world.waitForStatus(lost.id, 'Completed', 60_000);
  const [confirmed] = await world.chainTransactions(lost.id);
  expect(confirmed).toMatchObject({ status: 'confirmed' });

  // Deeper than CHAIN_ETHEREUM_CONFIRMATIONS (1): the completed transfer leaves the chain and
  // anvil's pool; the treasury's nonce on chain falls below the processor's next one.
  await world.anvil.testClient.revert({ id: snapshot });
  await mineBlocks(world, 3);
  expect(await world.anvil.publicClient.getBalance({ address: lost.address })).toBe(0n);

  // The processor sends the same bytes again (anvil mines them): the payee is paid once.
  await waitFor('the lost transfer mined again', async () => (await world.anvil.publicClient.getBalance({ address: lost.address })) === parseEther('0.3'), 30_000);
  expect(await world.anvil.publicClient.getTransaction({ hash: done.transaction_hash as `0x${string}` })).toMatchObject({ hash: done.transaction_hash });
  await waitFor('the incident logged', async () => processor!.logs.some((l) => l.includes('INCIDENT: a transaction recorded confirmed is no longer on the chain')));
  expect(await metricsOf(processor!)).toContain('payout_processor_nonce_resyncs_total{network="ethereum",outcome="lost_rebroadcast"} 1');

  // The next payout takes the nonce after it and completes: nothing waits on a gap.
  const next = await world.payout('ETH', '0.2');
  await mineBlocks(world, 1);
  await expectPaidOnce(next, 'ETH', '0.2');
  expect(await world.anvil.publicClient.getBalance({ address: lost.address })).toBe(parseEther('0.3'));
  expect(await world.events(lost.id, 'payout.completed')).toBe(1);
  expect(await world.signer.payoutSignatures(lost.id)).toHaveLength(1);
});

test('a transaction not mined within PAYOUT_REPLACE_AFTER is replaced (same nonce, higher fee) and the payout completes once', async () => {
  await start({ PAYOUT_REPLACE_AFTER: '2s' });
  await world.anvil.testClient.setAutomine(false);
  try {
    const payout = await world.payout('ETH', '3.5');
    const rows = await waitFor('a replacement', async () => {
      const found = await world.chainTransactions(payout.id);
      return found.length >= 2 && found[1]!.status === 'broadcast' ? found : undefined;
    }, 20_000);
    const [first, second] = rows;
    expect(second).toMatchObject({ replaces: first!.id, nonce: first!.nonce });
    const fees = await world.h.sql<{ max_fee_per_gas: string; max_priority_fee_per_gas: string }[]>`
      select max_fee_per_gas::text, max_priority_fee_per_gas::text from chain_transactions where id in ${world.h.sql([first!.id, second!.id])} order by id`;
    expect(BigInt(fees[1]!.max_fee_per_gas) * 1000n).toBeGreaterThanOrEqual(BigInt(fees[0]!.max_fee_per_gas) * 1125n);
    expect(BigInt(fees[1]!.max_priority_fee_per_gas) * 1000n).toBeGreaterThanOrEqual(BigInt(fees[0]!.max_priority_fee_per_gas) * 1125n);
    expect((await world.payoutRow(payout.id)).transaction_hash).toBe(second!.transaction_hash);

    await world.anvil.testClient.setAutomine(true);
    await mineBlocks(world, 1);
    await expectPaidOnce(payout, 'ETH', '3.5');
    const final = await world.chainTransactions(payout.id);
    const winner = final.find((r) => r.status === 'confirmed')!;
    expect(final.filter((r) => r.status === 'replaced').map((r) => r.id)).toEqual(final.filter((r) => r.id !== winner.id).map((r) => r.id));
    expect(await metricsOf(processor!)).toMatch(/treasury_transactions_replaced_total\{network="ethereum",purpose="payout"\} [1-9]/);
  } finally {
    await world.anvil.testClient.setAutomine(true);
  }
});

test('the signer\'s answer lost mid-request and the processor killed: nothing was stored, the restart signs the same nonce once more, one transfer', async () => {
  await start();
  await waitFor('the treasury from the signer', async () => processor!.logs.some((l) => l.includes('treasury address from the signer')));
  world.signerLink.holding = true;
  const payout = await world.payout('ETH', '1.75');
  await waitFor('the signer to sign (its answer held)', async () => (await world.signer.payoutSignatures(payout.id)).length === 1);
  await processor!.kill();
  expect(await world.chainTransactions(payout.id)).toEqual([]);
  expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending', claimed_by: null });

  world.signerLink.release();
  await start();
  await expectPaidOnce(payout, 'ETH', '1.75');
  // Asked again for the same nonce (the signer signs a payout for one nonce only).
  const signatures = await world.signer.payoutSignatures(payout.id);
  expect(signatures.length).toBeGreaterThanOrEqual(2);
  expect(new Set(signatures).size).toBe(1);
  expect(signatures[0]).toBe(Number((await world.chainTransactions(payout.id))[0]!.nonce));
});

test('the signer killed mid-request (signed, its answer never delivered) and restarted: the processor asks again for the same nonce, one transfer', async () => {
  await start();
  await waitFor('the treasury from the signer', async () => processor!.logs.some((l) => l.includes('treasury address from the signer')));
  world.signerLink.holding = true;
  const payout = await world.payout('ETH', '0.65');
  await waitFor('the signer to sign (its answer held)', async () => (await world.signer.payoutSignatures(payout.id)).length === 1);
  await world.signer.kill();
  world.signerLink.release();
  // The call failed: the processor's transaction rolled back, nothing stored or claimed.
  await waitFor('the failed round rolled back', async () => processor!.logs.some((l) => l.includes('processor round failed')));
  expect(await world.chainTransactions(payout.id)).toEqual([]);
  expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending', claimed_by: null });

  await world.signer.restart();
  await expectPaidOnce(payout, 'ETH', '0.65');
  const signatures = await world.signer.payoutSignatures(payout.id);
  expect(signatures.length).toBeGreaterThanOrEqual(2);
  expect(new Set(signatures).size).toBe(1);
});

test('a payout whose signature was lost keeps the nonce it was signed for, even when an older payout became claimable meanwhile', async () => {
  await start();
  await waitFor('the treasury from the signer', async () => processor!.logs.some((l) => l.includes('treasury address from the signer')));
  const older = await world.payout('ETH', '0.45', { approve: false });
  world.signerLink.holding = true;
  const lost = await world.payout('ETH', '0.55');
  await waitFor('the signer to sign (its answer held)', async () => (await world.signer.payoutSignatures(lost.id)).length === 1);
  await processor!.kill();
  world.signerLink.release();
  const [signedFor] = await world.signer.payoutSignatures(lost.id);

  // Approved while no processor runs: older, so it would come first in the queue.
  await world.approve(older.id);
  await start();
  await expectPaidOnce(lost, 'ETH', '0.55');
  await expectPaidOnce(older, 'ETH', '0.45');
  expect(Number((await world.chainTransactions(lost.id))[0]!.nonce)).toBe(signedFor);
  expect(Number((await world.chainTransactions(older.id))[0]!.nonce)).toBe(signedFor! + 1);
  const refusals = await world.h.sql`select rule from signer.audit_log where payout_id in ${world.h.sql([lost.id, older.id])} and outcome = 'refused'`;
  expect(refusals).toEqual([]);
});

test('a stored transaction the node keeps refusing is replaced too after PAYOUT_REPLACE_AFTER; when the node takes them one version is mined, the other replaced', async () => {
  await start({ PAYOUT_REPLACE_AFTER: '2s' });
  world.rpc.sendFault = 'refuse';
  const payout = await world.payout('ETH', '0.35');
  const rows = await waitFor('a replacement of the refused row', async () => {
    const found = await world.chainTransactions(payout.id);
    return found.length >= 2 ? found : undefined;
  }, 20_000);
  expect(rows.map((r) => r.status)).toEqual(['signed', 'signed']);
  expect(rows[1]).toMatchObject({ replaces: rows[0]!.id, nonce: rows[0]!.nonce });
  expect(await world.anvil.publicClient.getBalance({ address: payout.address })).toBe(0n);

  world.rpc.sendFault = 'none';
  await expectPaidOnce(payout, 'ETH', '0.35');
});
