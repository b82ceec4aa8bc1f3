/**
 * Issue 23: the processor (`payout process ethereum`, a real child process) sends live payouts on a
 * real anvil through the signer — exact amounts, one transfer each, nonces in order, Approve and
 * PAYOUT_AUTO_MAX_<ASSET>, the pause switch, a reverted token transfer rejected with its reason,
 * one active processor per network, its metrics, and no key material in any log.
 */
import { parseEther } from 'viem';
import { tokenUnits } from '../../../test/support/anvil';
import { secretsOfTestSeed, TEST_MNEMONIC } from './support/signer';
import { balanceOf, OPERATOR_TOKEN, sleep, waitFor } from './support/harness';
import { activeProcessor, freshAddress, metricsOf, setBlacklisted, startTreasuryWorld, type ProcessorProcess, type TreasuryWorld } from './support/treasury';

let world: TreasuryWorld;
let processor: ProcessorProcess;

beforeAll(async () => {
  // The signer refuses USDC payouts above 500 (its own limit, docs/treasury.md#signer-policy).
  world = await startTreasuryWorld({ processorEnv: { PAYOUT_AUTO_MAX_ETH: '0.5' }, signerEnv: { SIGNER_MAX_PAYOUT_USDC: '500', PAYOUT_AUTO_MAX_ETH: '0.5' } });
  processor = await world.startProcessor();
  await activeProcessor(processor);
}, 120_000);

afterAll(async () => {
  await world?.dispose();
});

test('ETH and USDT payouts arrive exactly, complete once with the real hash, and debit the hold', async () => {
  const eth = await world.payout('ETH', '1.23456789');
  const usdt = await world.payout('USDT', '12.345678');
  const approvedAt = Date.now();
  const ethDone = await world.waitForStatus(eth.id, 'Completed');
  const usdtDone = await world.waitForStatus(usdt.id, 'Completed');
  console.log(`approve → Completed (1 confirmation, poll 200 ms): ${Date.now() - approvedAt} ms for two payouts`);

  expect(await world.anvil.publicClient.getBalance({ address: eth.address })).toBe(parseEther('1.23456789'));
  const transfers = await world.transfersTo('USDT', usdt.address);
  expect(transfers).toEqual([{ value: tokenUnits('12.345678'), transactionHash: usdtDone.transaction_hash }]);
  const ethTx = await world.anvil.publicClient.getTransaction({ hash: ethDone.transaction_hash as `0x${string}` });
  expect(ethTx.to?.toLowerCase()).toBe(eth.address.toLowerCase());

  for (const done of [ethDone, usdtDone]) {
    expect(done.claimed_by).toBe('processor:ethereum');
    expect(done.confirmations).toBeGreaterThanOrEqual(1);
    expect(await world.events(done.id, 'payout.completed')).toBe(1);
    expect(await world.chainTransactions(done.id)).toEqual([expect.objectContaining({ status: 'confirmed', purpose: 'payout', transaction_hash: done.transaction_hash })]);
  }
  const project = { id: eth.projectId, environment: 'live' as const, email: '', emailVerified: true };
  expect(await balanceOf(world.h, project, 'ETH')).toEqual({ available: '999998.76543211', pending: '0', total: '999998.76543211' });
});

test('ten payouts at once all land: one transfer each, nonces consecutive in the order of the payouts, none twice', async () => {
  // Created unapproved, approved together: the processor finds ten claimable at once.
  const payouts = [];
  for (let i = 0; i < 10; i++) payouts.push(await world.payout(i % 2 === 0 ? 'ETH' : 'USDC', i % 2 === 0 ? `1.${i + 1}` : `${i + 1}.5`, { approve: false }));
  // 1.1 … 1.9 ETH: above PAYOUT_AUTO_MAX_ETH (0.5), so none leaves before the Approve.
  const started = Date.now();
  await world.h.sql`update payouts set approved_at = now(), approved_by = 'test-operator' where id in ${world.h.sql(payouts.map((p) => p.id))}`;
  for (const p of payouts) await world.waitForStatus(p.id, 'Completed', 60_000);
  const elapsedMs = Date.now() - started;
  console.log(`ten payouts approved at once → all Completed in ${elapsedMs} ms: ${((10 * 60_000) / elapsedMs).toFixed(0)} payouts/minute from one processor (anvil automine, 1 confirmation, poll 200 ms)`);

  const rows = await world.h.sql<{ payout_id: string; nonce: string; status: string }[]>`
    select c.payout_id, c.nonce, c.status from chain_transactions c join payouts p on p.id = c.payout_id
    where c.payout_id in ${world.h.sql(payouts.map((p) => p.id))} order by p.created_at, p.id`;
  expect(rows).toHaveLength(10);
  expect(rows.every((r) => r.status === 'confirmed')).toBe(true);
  const nonces = rows.map((r) => Number(r.nonce));
  expect(nonces).toEqual(nonces.map((_, i) => nonces[0]! + i));
  for (const [i, p] of payouts.entries()) {
    if (i % 2 === 0) expect(await world.anvil.publicClient.getBalance({ address: p.address })).toBe(parseEther(`1.${i + 1}`));
    else expect((await world.transfersTo('USDC', p.address)).map((t) => t.value)).toEqual([tokenUnits(`${i + 1}.5`)]);
    expect(await world.events(p.id, 'payout.completed')).toBe(1);
  }
});

test('a payout above PAYOUT_AUTO_MAX_ETH waits for Approve; one within it is sent without; nothing starts while the network is paused', async () => {
  const small = await world.payout('ETH', '0.5', { approve: false });
  const large = await world.payout('ETH', '0.51', { approve: false });
  await world.waitForStatus(small.id, 'Completed');
  await sleep(1_000); // five rounds
  expect(await world.payoutRow(large.id)).toMatchObject({ status: 'Pending', claimed_by: null, transaction_hash: null });

  await world.h.sql`update treasury_networks set paused = true, paused_by = 'test-operator' where network = 'ethereum'`;
  await world.approve(large.id);
  await sleep(1_000);
  expect(await world.payoutRow(large.id)).toMatchObject({ status: 'Pending', claimed_by: null });
  await world.h.sql`update treasury_networks set paused = false, paused_by = null where network = 'ethereum'`;
  await world.waitForStatus(large.id, 'Completed');
  expect(await world.anvil.publicClient.getBalance({ address: large.address })).toBe(parseEther('0.51'));
});

test('a token transfer the chain reverts (blacklisted destination) ends Rejected with the reason, the hold released', async () => {
  const destination = freshAddress();
  await setBlacklisted(world, world.tokens.usdt, destination);
  const payout = await world.payout('USDT', '25', { address: destination });
  const rejected = await world.waitForStatus(payout.id, 'Rejected');
  expect(rejected.admin_note).toMatch(/^the USDT transfer reverted on chain \(transaction 0x[0-9a-f]{64}\): .*blacklisted/);
  expect(rejected.transaction_hash).toMatch(/^0x[0-9a-f]{64}$/);
  const receipt = await world.anvil.publicClient.getTransactionReceipt({ hash: rejected.transaction_hash as `0x${string}` });
  expect(receipt.status).toBe('reverted');
  expect(await world.transfersTo('USDT', destination)).toEqual([]);
  expect(await world.events(payout.id, 'payout.rejected')).toBe(1);
  expect(await world.events(payout.id, 'payout.completed')).toBe(0);
  const project = { id: payout.projectId, environment: 'live' as const, email: '', emailVerified: true };
  expect(await balanceOf(world.h, project, 'USDT')).toEqual({ available: '1000000', pending: '0', total: '1000000' });
  expect(await world.chainTransactions(payout.id)).toEqual([expect.objectContaining({ status: 'failed' })]);
});

test('a payout the signer refuses stays Pending and unclaimed, the refusal counted; the payouts after it are sent', async () => {
  const refused = await world.payout('USDC', '600');
  const next = await world.payout('USDC', '60');
  await world.waitForStatus(next.id, 'Completed');
  expect(await world.payoutRow(refused.id)).toMatchObject({ status: 'Pending', claimed_by: null, transaction_hash: null });
  expect(await world.chainTransactions(refused.id)).toEqual([]);
  const rules = await world.h.sql<{ rule: string }[]>`select rule from signer.audit_log where payout_id = ${refused.id} and outcome = 'refused'`;
  expect(rules.map((r) => r.rule)).toEqual(['amount_above_limit']);
  expect(await metricsOf(processor)).toMatch(/payout_processor_signer_refusals_total\{network="ethereum",purpose="payout"\} 1/);
  // Refused, not lost: nothing holds the treasury's nonces for it.
  expect(await world.h.sql`select 1 from payout_sign_attempts where payout_id = ${refused.id}`).toEqual([]);
  // An operator sees it and why on the Treasury page (an outside review approved such a payout and
  // it stayed Pending for good, listed nowhere); the payout sent after it is not listed.
  const { networks } = await world.h.client.getTreasury({ operatorToken: OPERATOR_TOKEN });
  const ethereum = networks.find((n) => n.network === 'ethereum')!;
  expect(ethereum.refusedBySigner.map((p) => p.id)).toEqual([refused.id]);
  expect(ethereum.refusedBySigner[0]).toMatchObject({ signerRefusal: expect.stringContaining('exceed SIGNER_MAX_PAYOUT_USDC'), signerRefusedAt: expect.anything() });
  // Rejected by the operator, it leaves the list.
  await world.h.client.rejectPayout({ payoutId: refused.id, adminNote: 'above the signer limit', operatorToken: OPERATOR_TOKEN });
  const after = (await world.h.client.getTreasury({ operatorToken: OPERATOR_TOKEN })).networks.find((n) => n.network === 'ethereum')!;
  expect(after.refusedBySigner).toEqual([]);
});

test('a USDT payout on bsc is not the Ethereum processor\'s: it stays Pending and unclaimed, nothing is signed or sent, while an ethereum one after it completes', async () => {
  const onBsc = await world.payout('USDT', '5', { network: 'bsc' });
  const onEthereum = await world.payout('USDT', '5');
  await world.waitForStatus(onEthereum.id, 'Completed');
  await sleep(1_000); // five more rounds
  expect(await world.payoutRow(onBsc.id)).toMatchObject({ status: 'Pending', claimed_by: null, transaction_hash: null, network: 'bsc' });
  expect(await world.chainTransactions(onBsc.id)).toEqual([]);
  expect(await world.h.sql`select 1 from signer.audit_log where payout_id = ${onBsc.id}`).toEqual([]);
  expect(await world.transfersTo('USDT', onBsc.address)).toEqual([]);
});

test('metrics: treasury balance per asset, payouts in flight and the oldest one\'s age, sweep tasks, transactions broadcast', async () => {
  const treasuryUsdt = await world.anvil.publicClient.readContract({ address: world.tokens.usdt, abi: [{ type: 'function', name: 'balanceOf', stateMutability: 'view', inputs: [{ type: 'address' }], outputs: [{ type: 'uint256' }] }], functionName: 'balanceOf', args: [world.treasury] });
  const line = `treasury_balance_base_units{network="ethereum",asset="USDT"} ${Number(treasuryUsdt)}`;
  // The gauges are set at the end of each round.
  const text = await waitFor('the treasury gauges', async () => {
    const scraped = await metricsOf(processor);
    // (once a round has ended after the last completion)
    return scraped.includes(line) && scraped.includes('payouts_in_flight{network="ethereum"} 0') ? scraped : undefined;
  });
  expect(text).toMatch(/treasury_balance_base_units\{network="ethereum",asset="ETH"\} \d/);
  expect(text).toContain('payouts_in_flight{network="ethereum"} 0');
  expect(text).toContain('payout_in_flight_oldest_seconds{network="ethereum"} 0');
  expect(text).toContain('sweep_tasks{network="ethereum",status="pending"} 0');
  expect(text).toMatch(/treasury_transactions_broadcast_total\{network="ethereum",purpose="payout"\} 17/);
  expect(text).toMatch(/treasury_transactions_failed_total\{network="ethereum",purpose="payout"\} 1/);
  expect(text).toContain('payout_processor_active{network="ethereum"} 1');
});

test('one active processor per network: a second stands by and takes over when the active one is killed', async () => {
  const standby = await world.startProcessor();
  await sleep(1_000);
  expect(standby.logs.some((l) => l.includes('advisory lock taken'))).toBe(false);
  expect(await metricsOf(standby)).toContain('payout_processor_active{network="ethereum"} 0');

  await processor.kill();
  await activeProcessor(standby);
  const payout = await world.payout('ETH', '0.75');
  const done = await world.waitForStatus(payout.id, 'Completed');
  expect(done.claimed_by).toBe('processor:ethereum');
  expect(await world.anvil.publicClient.getBalance({ address: payout.address })).toBe(parseEther('0.75'));
  processor = standby;
});

test('a round\'s page of payouts the treasury cannot cover does not hold back the payout after them (docs/treasury.md#payouts-that-cannot-go-yet)', async () => {
  // 50 (a round's page) approved payouts of more than the treasury holds (1,000 ETH), the oldest.
  const uncovered = [];
  for (let i = 0; i < 50; i++) uncovered.push(await world.payout('ETH', '5000', { approve: false }));
  await world.h.sql`update payouts set approved_at = now(), approved_by = 'test-operator' where id in ${world.h.sql(uncovered.map((p) => p.id))}`;
  try {
    const coverable = await world.payout('ETH', '0.25');
    await world.waitForStatus(coverable.id, 'Completed', 30_000);
    expect(await world.anvil.publicClient.getBalance({ address: coverable.address })).toBe(parseEther('0.25'));
    // The others wait, unclaimed, nothing signed for them.
    for (const { id } of uncovered) {
      expect(await world.payoutRow(id)).toMatchObject({ status: 'Pending', claimed_by: null, transaction_hash: null });
      expect(await world.chainTransactions(id)).toEqual([]);
    }
  } finally {
    for (const { id, projectId } of uncovered) await world.h.client.cancelPayout({ projectId, payoutId: id });
  }
});

test('a payout waiting for the treasury keeps its place: once funded, it goes before a newer one (docs/treasury.md#payouts-that-cannot-go-yet)', async () => {
  await world.anvil.testClient.setBalance({ address: world.treasury, value: parseEther('500') });
  try {
    const older = await world.payout('ETH', '900');
    await waitFor('the older payout looked at and found uncovered', async () => processor.logs.some((line) => line.includes(older.id) && line.includes('cannot cover')));
    expect(await world.payoutRow(older.id)).toMatchObject({ status: 'Pending', claimed_by: null });
    // The operator funds the treasury for it; a newer payout comes meanwhile.
    await world.anvil.testClient.setBalance({ address: world.treasury, value: parseEther('1000') });
    const newer = await world.payout('ETH', '200');
    await world.waitForStatus(older.id, 'Completed', 20_000);
    // What is left (~100 ETH) does not cover the newer one: it waits, unclaimed.
    expect(await world.payoutRow(newer.id)).toMatchObject({ status: 'Pending', claimed_by: null, transaction_hash: null });
    await world.h.client.cancelPayout({ projectId: newer.projectId, payoutId: newer.id });
  } finally {
    await world.anvil.testClient.setBalance({ address: world.treasury, value: parseEther('1000') });
  }
});

test('no log line of the processor or the signer holds the mnemonic, the seed or a private key', async () => {
  // The phrase, each pair of its words (single words are ordinary English), the seed, the account
  // xprv, the treasury's and the first deposit addresses' private keys.
  const words = TEST_MNEMONIC.split(' ');
  const pairs = words.slice(1).map((word, i) => `${words[i]} ${word}`);
  const secrets = [...secretsOfTestSeed([0, 1, 2, 3, 4, 5]).filter((s) => !words.includes(s)), ...pairs];
  const processorLogs = world.processors.flatMap((p) => p.logs).join('\n');
  const signerLogs = world.signer.logs().join('\n');
  expect(processorLogs).toContain('payout completed on chain');
  expect(signerLogs).toContain('payout signer serving');
  for (const secret of secrets) {
    expect(processorLogs.toLowerCase()).not.toContain(secret.toLowerCase());
    expect(signerLogs.toLowerCase()).not.toContain(secret.toLowerCase());
  }
});
