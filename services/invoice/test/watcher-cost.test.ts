/**
 * What a block costs the watcher must depend on the block, not on how many invoices are open
 * (docs/watcher.md, "Cost per block"). With 20,000 open live BTC invoices watched, paying a new
 * invoice through the mempool and two blocks asks the Esplora stand-in (real bitcoinjs-lib
 * transactions) for a handful of per-address reads, not 20,000 per poll; the watched set is kept
 * incrementally and still sees an invoice whose transaction committed late.
 */
import { randomBytes } from 'node:crypto';
import * as bitcoin from 'bitcoinjs-lib';
import { WatchedSet } from '../src/watcher/watched-set';
import { Payer } from './support/esplora-stand-in';
import { copyOpenInvoices } from './support/open-invoices';
import { startUtxoHarness, type UtxoHarness } from './support/watcher-harness';

const WATCHED = 20_000;
const RECONCILE_PER_BLOCK = 50;

let u: UtxoHarness;

beforeAll(async () => {
  u = await startUtxoHarness('bitcoin', undefined, { WATCHER_RECONCILE_PER_BLOCK: String(RECONCILE_PER_BLOCK) });
}, 60_000);

afterAll(async () => {
  await u?.dispose();
});

/** `count` more open live BTC invoices, copies of a real one with addresses of their own. */
async function openInvoices(count: number, template: string): Promise<string[]> {
  const addresses = Array.from({ length: count }, () => bitcoin.payments.p2wpkh({ hash: randomBytes(20), network: u.chain.network }).address!);
  await copyOpenInvoices(u.h.sql, template, addresses);
  return addresses;
}

const perAddressReads = (paths: readonly string[], kind: 'mempool' | 'chain') => paths.filter((p) => p.startsWith('/scripthash/') && p.includes(`/txs/${kind}`)).length;

test(`with ${WATCHED.toLocaleString('en')} open invoices watched, a payment costs the watcher requests for its blocks, not for the open invoices`, async () => {
  const template = await u.liveInvoice();
  await openInvoices(WATCHED, template.id);
  const payer = u.chain.fundedPayer(10_000_000, 4);

  // The watcher has taken the big set in (a first payment after the load is seen).
  const warmUp = await u.liveInvoice();
  u.chain.broadcast(u.chain.pay(payer, [{ address: warmUp.address, value: warmUp.sat }]));
  await u.until(warmUp.id, 'warm-up Confirming', (s) => s.status === 'Confirming', 60_000);

  const from = u.chain.paths.length;
  const heightBefore = u.chain.tip.height;
  const invoice = await u.liveInvoice();
  const payment = u.chain.pay(payer, [{ address: invoice.address, value: invoice.sat }]);
  u.chain.broadcast(payment);
  await u.until(invoice.id, 'Confirming from the mempool', (s) => s.status === 'Confirming');
  u.chain.mine([payment]);
  u.chain.mine([]);
  const paid = await u.until(invoice.id, 'Paid at 2 confirmations', (s) => s.status === 'Paid');
  expect(paid.payments).toEqual([expect.objectContaining({ transaction_hash: payment.txid, status: 'confirmed', amount: (invoice.sat / 1e8).toFixed(8).replace(/0+$/, '') })]);

  const asked = u.chain.paths.slice(from);
  const polls = asked.filter((p) => p === '/mempool/txids').length;
  expect(polls).toBeGreaterThanOrEqual(1);
  // Per-address mempool reads only for addresses that joined the set (the new invoice), never
  // the whole set on every poll (that was 20,000 per poll).
  expect(perAddressReads(asked, 'mempool')).toBeLessThanOrEqual(3);
  // Reconciliation reads a bounded slice per newly confirmed height.
  const heights = u.chain.tip.height - heightBefore + 1;
  expect(perAddressReads(asked, 'chain')).toBeLessThanOrEqual(RECONCILE_PER_BLOCK * heights);
  expect(asked.length).toBeLessThan(polls * 10 + RECONCILE_PER_BLOCK * heights + 50);
}, 180_000);

test('the watched set adds new invoices incrementally, sees one whose transaction committed late, and drops ended windows at the full reload', async () => {
  let clock = 0;
  const set = new WatchedSet({ sql: u.h.sql, networks: ['bitcoin'], monitorAfterMs: 60_000, fullReloadMs: 60_000, overlapMs: 120_000, now: () => clock });
  const first = await u.liveInvoice();
  await set.refresh();
  expect(set.invoiceOf(first.address)).toBe(first.id);
  const sizeAfterFull = set.size;

  // Created by a transaction that began 90 s before the newest invoice but committed after it.
  const newest = await u.liveInvoice();
  const [late] = await openInvoicesAt(1, newest.id, '90 seconds');
  // Older than the overlap: an incremental read does not reach it (a full one does).
  const [ancient] = await openInvoicesAt(1, newest.id, '10 minutes');
  clock += 1_000;
  await set.refresh();
  expect(set.lookup(newest.address)).toBe(newest.address);
  expect(set.lookup(late!)).toBe(late);
  expect(set.lookup(ancient!)).toBeUndefined();
  expect(set.size).toBe(sizeAfterFull + 2);

  // The first invoice's window ends (expired long ago): still held until the full reload.
  await u.h.sql`update invoices set status = 'Expired', created_at = now() - interval '2 hours', expired_at = now() - interval '1 hour' where id = ${first.id}`;
  clock += 1_000;
  await set.refresh();
  expect(set.invoiceOf(first.address)).toBe(first.id);
  clock += 60_000;
  await set.refresh();
  expect(set.invoiceOf(first.address)).toBeUndefined();
  expect(set.lookup(ancient!)).toBe(ancient);
});

/** Copies of `template` created `ago` before it (as a transaction started that long before would stamp them). */
async function openInvoicesAt(count: number, template: string, ago: string): Promise<string[]> {
  const addresses = await openInvoices(count, template);
  await u.h.sql`update invoices set created_at = created_at - ${ago}::interval where address = any(${addresses})`;
  return addresses;
}

test('a payment in the mempool before its address was watched is still found (the address is read once when it joins)', async () => {
  const payer = u.chain.fundedPayer(10_000_000, 2);
  const target = new Payer(u.chain.network).payment.address!;
  const early = u.chain.pay(payer, [{ address: target, value: 50_000 }]);
  u.chain.broadcast(early);
  // The watcher polls the mempool (and marks this transaction as looked at) before the invoice exists.
  const polled = u.chain.paths.length;
  await waitForPolls(polled, 2);
  const template = await u.liveInvoice();
  const [address] = await openInvoices(1, template.id);
  await u.h.sql`update invoices set address = ${target} where address = ${address!}`;
  const [row] = await u.h.sql<{ id: string }[]>`select id from invoices where address = ${target}`;
  const seen = await u.until(row!.id, 'the early payment recorded', (s) => s.payments.length === 1);
  expect(seen.payments[0]).toMatchObject({ transaction_hash: early.txid, status: 'seen', amount: '0.0005' });
});

async function waitForPolls(from: number, polls: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (u.chain.paths.slice(from).filter((p) => p === '/mempool/txids').length < polls) {
    if (Date.now() > deadline) throw new Error('the watcher did not poll the mempool');
    await new Promise((r) => setTimeout(r, 50));
  }
}
