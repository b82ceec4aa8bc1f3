/**
 * Live Litecoin payments (ltc1… P2WPKH) through the watcher role and the Esplora adapter, against
 * an Esplora STAND-IN serving real Litecoin transactions signed with bitcoinjs-lib: Confirming
 * from the mempool, still Confirming at 5 confirmations, Paid at 6 with one invoice.paid.
 */
import { LITECOIN } from './support/esplora-stand-in';
import { startUtxoHarness, type UtxoHarness } from './support/watcher-harness';

let u: UtxoHarness;

beforeAll(async () => {
  u = await startUtxoHarness('litecoin', LITECOIN);
}, 60_000);

afterAll(async () => {
  await u?.dispose();
});

test('LTC: mempool → Confirming; 5 confirmations still Confirming; Paid at 6 with exactly one invoice.paid', async () => {
  const invoice = await u.liveInvoice('90.00');
  expect(invoice.address).toMatch(/^ltc1q[02-9ac-hj-np-z]{38}$/);
  expect((await u.state(invoice.id)).confirmations_required).toBe(6);
  const payer = u.chain.fundedPayer(300_000_000, 1);
  const tx = u.chain.pay(payer, [{ address: invoice.address, value: invoice.sat }]);
  u.chain.broadcast(tx);
  await u.until(invoice.id, 'Confirming', (s) => s.status === 'Confirming' && s.payments[0]?.confirmations === 0);
  u.chain.mine();
  for (let i = 0; i < 4; i++) u.chain.mine([]);
  const five = await u.until(invoice.id, '5 confirmations', (s) => s.payments[0]?.confirmations === 5);
  expect(five.status).toBe('Confirming');
  u.chain.mine([]);
  const paid = await u.until(invoice.id, 'Paid', (s) => s.status === 'Paid');
  expect(paid.payments).toEqual([expect.objectContaining({ transaction_hash: tx.txid, confirmations: 6, status: 'confirmed' })]);
  expect(paid.events.filter((e) => e === 'invoice.paid')).toHaveLength(1);
});
