/**
 * The expiry sweeper waits for the watcher of the invoice's OWN network (docs/networks.md): a live
 * Base USDC invoice past expiredAt is not expired while the base watcher has not seen blocks past
 * that time — however far the ethereum watcher (USDC's default network) has got — because a
 * payment mined on Base before expiry may not be read yet. The cursors are set in SQL as the
 * watchers would leave them (no watcher runs here).
 */
import { createRequest, liveProject, sleep, startInvoiceHarness, waitFor, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startInvoiceHarness();
});

afterAll(async () => {
  await h?.dispose();
});

async function cursorAt(chain: string, blockTime: Date): Promise<void> {
  await h.sql`
    insert into chain_cursors (chain, height, hash, block_time) values (${chain}, 1, ${`0x${'ab'.repeat(32)}`}, ${blockTime})
    on conflict (chain) do update set block_time = excluded.block_time`;
}

const statusOf = async (id: string) => (await h.sql<{ status: string }[]>`select status from invoices where id = ${id}`)[0]?.status;

test("a live invoice is expired only once its pay_network's watcher has seen past expiredAt", async () => {
  const invoice = (await h.client.createInvoice(createRequest(liveProject(), { priceAmount: '5.00', payCurrency: 'USDC', payNetwork: 'base' }))).invoice!;
  // Where the API still stores the default network for payNetwork (the invoice API's work), the row says base here.
  await h.sql`update invoices set pay_network = 'base', created_at = created_at - interval '2 hours', expired_at = now() - interval '10 minutes' where id = ${invoice.id}`;
  const [row] = await h.sql<{ expired_at: Date }[]>`select expired_at from invoices where id = ${invoice.id}`;

  // Ethereum (USDC's default network) is watched up to now; Base only to before expiredAt.
  await cursorAt('ethereum', new Date());
  await cursorAt('base', new Date(row!.expired_at.getTime() - 60_000));
  await sleep(1_000); // ten sweeps (every 100 ms)
  expect(await statusOf(invoice.id)).toBe('Waiting');

  // Base's watcher passes expiredAt: now the sweeper may decide, and the rule says Expired.
  await cursorAt('base', new Date());
  await waitFor('the invoice expired', async () => ((await statusOf(invoice.id)) === 'Expired' ? true : undefined));
});
