/**
 * Issue 23's measurements (for bench/results.md), logged: payouts per minute from one processor
 * (50 approved at once, ETH and USDT, the real signer over mutual TLS, anvil automine, 1
 * confirmation, 200 ms rounds), and the time from an operator's Approve to Completed, one payout at
 * a time. The checks keep it honest: every payout lands once, at its amount.
 */
import { parseEther } from 'viem';
import { tokenUnits } from '../../../test/support/anvil';
import { activeProcessor, startTreasuryWorld, type TreasuryWorld } from './support/treasury';

let world: TreasuryWorld;

beforeAll(async () => {
  world = await startTreasuryWorld();
  await activeProcessor(await world.startProcessor());
}, 120_000);

afterAll(async () => {
  await world?.dispose();
});

const COUNT = 50;

test(`${COUNT} payouts approved at once: payouts per minute from one processor`, async () => {
  const payouts = [];
  for (let i = 0; i < COUNT; i++) {
    const currency = i % 2 === 0 ? 'ETH' : 'USDT';
    payouts.push({ currency, amount: `${i + 1}.25`, ...(await world.payout(currency, `${i + 1}.25`, { approve: false })) });
  }
  const started = Date.now();
  await world.h.sql`update payouts set approved_at = now(), approved_by = 'bench' where id in ${world.h.sql(payouts.map((p) => p.id))}`;
  for (const p of payouts) await world.waitForStatus(p.id, 'Completed', 180_000);
  const elapsedMs = Date.now() - started;
  console.log(`${COUNT} payouts (half ETH, half USDT) approved at once → all Completed in ${elapsedMs} ms: ${((COUNT * 60_000) / elapsedMs).toFixed(0)} payouts/minute from one processor`);
  for (const p of payouts) {
    if (p.currency === 'ETH') expect(await world.anvil.publicClient.getBalance({ address: p.address })).toBe(parseEther(p.amount));
    else expect((await world.transfersTo('USDT', p.address)).map((t) => t.value)).toEqual([tokenUnits(p.amount)]);
    expect(await world.events(p.id, 'payout.completed')).toBe(1);
  }
}, 300_000);

test('Approve → Completed, one payout at a time', async () => {
  const samples: number[] = [];
  for (let i = 0; i < 10; i++) {
    const payout = await world.payout(i % 2 === 0 ? 'ETH' : 'USDT', '1.5', { approve: false });
    const approved = Date.now();
    await world.approve(payout.id);
    await world.waitForStatus(payout.id, 'Completed');
    samples.push(Date.now() - approved);
  }
  samples.sort((a, b) => a - b);
  console.log(`Approve → Completed (1 confirmation, 200 ms rounds, anvil automine), 10 payouts: median ${samples[5]} ms, min ${samples[0]} ms, max ${samples[9]} ms`);
  expect(samples[9]).toBeLessThan(30_000);
}, 120_000);
