/**
 * The Tron adapter's cost per block depends on the block, not on how many invoices are open
 * (docs/watcher.md, "Cost per block"; docs/performance.md#the-watcher). Against the Tron HTTP API
 * STAND-IN (no Tron node installs here; blocks and TransferContract transactions in the API's JSON
 * shapes): the API requests the watcher makes for the same run of blocks are counted with a handful
 * of open TRX invoices and again with 20,000 more open, and they are the same per block; the
 * payment inside them is found either way.
 */
import { randomBytes } from 'node:crypto';
import { tronAddressFromHex } from '@coinvoice/chains/tron/address';
import { createRequest, liveProject, waitFor, type Harness } from './support/harness';
import { copyOpenInvoices } from './support/open-invoices';
import type { TronStandIn } from './support/tron-stand-in';
import { startTronWatcherHarness, type TronWatcherHarness } from './support/tron-watcher-harness';

const MANY = 20_000;
const BLOCKS = 30;

let t: TronWatcherHarness;
let h: Harness;
let chain: TronStandIn;

beforeAll(async () => {
  t = await startTronWatcherHarness();
  ({ h, chain } = t);
}, 60_000);

afterAll(async () => {
  await t?.dispose();
});

async function paymentCount(invoiceId: string): Promise<number> {
  const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from payments where invoice_id = ${invoiceId}`;
  return row!.n;
}

/** A TRX invoice, paid in the middle of BLOCKS new blocks (each with a few unrelated transfers); the API paths the watcher asked meanwhile. */
async function runOfBlocks(): Promise<string[]> {
  const invoice = (await h.client.createInvoice(createRequest(liveProject(), { priceAmount: '27.00', priceCurrency: 'USD', payCurrency: 'TRX' }))).invoice!;
  // The watcher has caught up to the tip before the run starts.
  const start = chain.tip.blockID;
  await waitFor('the watcher at the tip', async () => chain.paths.slice(-20).includes('/wallet/getnowblock') && chain.tip.blockID === start);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const from = chain.paths.length;
  for (let i = 0; i < BLOCKS; i++) {
    const others = Array.from({ length: 3 }, () => chain.transfer(tronAddressFromHex(`41${randomBytes(20).toString('hex')}`)!, 1_000_000));
    chain.mine(i === BLOCKS / 2 ? [...others, chain.transfer(invoice.address, 100_000_000)] : others);
  }
  await waitFor('the payment recorded', async () => ((await paymentCount(invoice.id)) === 1 ? true : undefined), 30_000);
  // Every block read: the watcher asked for the last one.
  await waitFor('the last block read', async () => chain.paths.slice(from).filter((p) => p === '/wallet/getblockbynum').length >= BLOCKS, 30_000);
  await new Promise((resolve) => setTimeout(resolve, 500));
  return chain.paths.slice(from);
}

const perBlock = (paths: readonly string[]) => paths.filter((p) => p !== '/wallet/getnowblock').length / BLOCKS;

test(`a block costs the same API requests with a handful of open TRX invoices and with ${MANY.toLocaleString('en')} more`, async () => {
  const few = await runOfBlocks();
  const template = (await h.client.createInvoice(createRequest(liveProject(), { priceAmount: '27.00', priceCurrency: 'USD', payCurrency: 'TRX' }))).invoice!;
  await copyOpenInvoices(h.sql, template.id, Array.from({ length: MANY }, () => tronAddressFromHex(`41${randomBytes(20).toString('hex')}`)!));
  const many = await runOfBlocks();
  // Requests other than the head poll, per block: the block itself (and the token logs of the
  // block when TRC-20 tokens are watched), however many addresses are open.
  const histogram = (paths: readonly string[]) => Object.fromEntries([...new Set(paths)].map((p) => [p, paths.filter((q) => q === p).length]));
  expect(perBlock(many)).toBeLessThanOrEqual(perBlock(few) + 0.2);
  // The block by number and by id (a reorg check) and its transaction infos: three, plus a re-read now and then.
  expect(perBlock(many)).toBeLessThan(3.5);
  console.log(`Tron watcher, API requests per block besides the head poll: ${perBlock(few).toFixed(2)} with a few open invoices, ${perBlock(many).toFixed(2)} with ${MANY} more; ${JSON.stringify(histogram(many))}`);
}, 120_000);
