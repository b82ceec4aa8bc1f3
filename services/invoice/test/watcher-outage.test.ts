/**
 * A 60 s outage of the Esplora source (a STAND-IN answering 503; CHAIN_OUTAGE_TEST_MS shortens it
 * for local runs): while it lasts nothing is marked, and neither the invoice paid in a block mined
 * before its expiredAt nor the unpaid one expires, although expiredAt passes; once the source
 * answers, the watcher catches up: the paid invoice is Paid, the unpaid one Expired.
 */
import { sleep, waitFor } from './support/harness';
import { startUtxoHarness, type UtxoHarness } from './support/watcher-harness';

const OUTAGE_MS = Number(process.env.CHAIN_OUTAGE_TEST_MS ?? 60_000);
let u: UtxoHarness;

beforeAll(async () => {
  u = await startUtxoHarness('bitcoin');
}, 60_000);

afterAll(async () => {
  await u?.dispose();
});

test(`a ${OUTAGE_MS / 1000} s source outage: nothing is marked, nothing paid before expiredAt expires, everything catches up after`, async () => {
  const paidOne = await u.liveInvoice();
  const unpaid = await u.liveInvoice();
  const payer = u.chain.fundedPayer(10_000_000, 1);
  const cursorBefore = await waitFor('the watcher at the tip', async () => {
    const [cursor] = await u.h.sql<{ height: string }[]>`select height from chain_cursors where chain = 'bitcoin'`;
    return cursor && Number(cursor.height) === u.chain.tip.height ? cursor : undefined;
  });

  u.chain.down = true;
  const outageStarted = Date.now();
  // Paid in blocks mined during the outage, before expiredAt (which the test moves close).
  const paymentBlock = u.chain.mine([u.chain.pay(payer, [{ address: paidOne.address, value: paidOne.sat }])]);
  u.chain.mine([]);
  // Block times are whole, strictly increasing seconds (this one may be a second ahead of the wall
  // clock): expiredAt is 3 s after the later of the payment block's time and now.
  const expiresAt = new Date(Math.max(Date.now(), paymentBlock.time * 1000) + 3_000);
  await u.h.sql`update invoices set expired_at = ${expiresAt} where id = any(${[paidOne.id, unpaid.id]}::uuid[])`;

  // Through the outage (expiredAt passes early on), check repeatedly: nothing marked, nothing expired.
  let blockAfterExpiry = false;
  while (Date.now() - outageStarted < OUTAGE_MS) {
    if (!blockAfterExpiry && Date.now() > expiresAt.getTime() + 1_000) {
      u.chain.mine([]); // a block whose time is after expiredAt: the unpaid invoice may expire once it is seen
      blockAfterExpiry = true;
    }
    for (const id of [paidOne.id, unpaid.id]) {
      const s = await u.state(id);
      expect(s.status).toBe('Waiting');
      expect(s.payments).toEqual([]);
    }
    const [cursor] = await u.h.sql<{ height: string }[]>`select height from chain_cursors where chain = 'bitcoin'`;
    expect(cursor?.height).toBe(cursorBefore.height);
    await sleep(Math.min(1_000, OUTAGE_MS / 10));
  }
  expect(blockAfterExpiry).toBe(true);
  expect(Date.now()).toBeGreaterThan(expiresAt.getTime());

  u.chain.down = false;
  const paid = await u.until(paidOne.id, 'Paid after the outage', (s) => s.status === 'Paid');
  expect(paid.payments).toEqual([expect.objectContaining({ confirmations: 3, status: 'confirmed' })]);
  expect(paid.events).not.toContain('invoice.expired');
  const expired = await u.until(unpaid.id, 'Expired after the outage', (s) => s.status === 'Expired');
  expect(expired.payments).toEqual([]);
}, OUTAGE_MS + 60_000);
