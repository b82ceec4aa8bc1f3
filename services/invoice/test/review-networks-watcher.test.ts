/**
 * Adversarial review of issue 24 (networks): the EVM watcher on a real node (anvil as Base, chain
 * id 8453, USDC compiled by solc) and the real `watch base` role, with the house (every EVM key's
 * treasury, houseSendersOf) configured from throwaway xpubs.
 *
 * The treasury sends gas to a deposit address to sweep a token deposit there — with networks, a
 * wrong-network or wrong-asset deposit too (docs/networks.md#wrong-network: "the treasury can
 * recover it: same key"). The block scan knows that gas is the house's (watcher.ts `fromHouse`),
 * but the balance reconciliation of the same watcher does not: it compares the address's native
 * balance with the recorded payments and records the difference as a payment of the invoice.
 */
import { startTestService, type TestService } from '../../../test/support/service';
import { deployTokens, mine, sendEth, sendToken, startAnvil, type Anvil, type Tokens } from '../../../test/support/anvil';
import { throwawayXpubs } from '../../../test/support/xpubs';
import { treasuryAddressOf } from '@coinvoice/chains/evm/treasury';
import { parseEther, type Address } from 'viem';
import { watcherService } from '../src/watcher/role';
import { createRequest, liveProject, sleep, startInvoiceHarness, waitFor, type Harness } from './support/harness';

const CONFIRMATIONS = 2;

let base: Anvil;
let tokens: Tokens;
let h: Harness;
let watcher: TestService;
const xpubs = throwawayXpubs();

function env(): Record<string, string> {
  return {
    ...xpubs,
    CHAIN_BASE_RPC_URL: base.url,
    CHAIN_BASE_CHAIN_ID: String(base.chainId),
    CHAIN_BASE_CONFIRMATIONS: String(CONFIRMATIONS),
    CHAIN_BASE_POLL_MS: '100',
    CHAIN_BASE_RPC_TIMEOUT_MS: '5000',
    CHAIN_BASE_USDC_CONTRACT: tokens.usdc,
  };
}

beforeAll(async () => {
  base = await startAnvil({ chainId: 8453 });
  tokens = await deployTokens(base);
  h = await startInvoiceHarness({ env: env() });
  watcher = await startTestService(watcherService('base'), { database: h.svc.database, namespace: h.svc.namespace, env: { ...h.svc.env, ...env() } });
}, 120_000);

afterAll(async () => {
  await watcher?.stop();
  await h?.dispose();
  await base?.stop();
});

/** A live ETH invoice on base (where CreateInvoice does not take payNetwork yet, the row is set to base). */
async function ethOnBase(priceAmount: string) {
  const invoice = (await h.client.createInvoice(createRequest(liveProject(), { priceAmount, priceCurrency: 'USD', payCurrency: 'ETH', payNetwork: 'base' }))).invoice!;
  await h.sql`update invoices set pay_network = 'base', confirmations_required = ${CONFIRMATIONS} where id = ${invoice.id}`;
  return invoice;
}

/** Sends `ether` from `from` (impersonated on anvil): the house's own transaction. */
async function sendAs(from: string, to: string, ether: string): Promise<void> {
  await base.testClient.impersonateAccount({ address: from as Address });
  await base.testClient.setBalance({ address: from as Address, value: parseEther('10') });
  const hash = (await base.publicClient.request({
    method: 'eth_sendTransaction' as never,
    params: [{ from, to, value: `0x${parseEther(ether).toString(16)}` }] as never,
  })) as `0x${string}`;
  await base.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
}

describe('review-networks: the house on an EVM network', () => {
  it("the treasury's sweep gas sent to a native-coin invoice's address is recorded by balance reconciliation as a payment and credited to the merchant (the block scan's house rule is not applied to reconciliation)", async () => {
    const invoice = await ethOnBase('10.00');
    // The customer pays the ETH invoice on base, and by mistake also sends USDC to the same address
    // (another asset: recorded, reported uncredited, swept by the treasury with gas it sends there).
    await sendEth(base, invoice.address, invoice.amountExpected);
    await sendToken(base, tokens.usdc, invoice.address, '5');
    await mine(base, CONFIRMATIONS);
    await waitFor('Paid, the USDC reported uncredited', async () => {
      const rows = await h.sql<{ reported_as: string | null }[]>`select reported_as from payments where invoice_id = ${invoice.id}`;
      return rows.length === 2 && rows.every((r) => r.reported_as !== null) ? rows : undefined;
    }, 30_000);

    // The sweep's gas, from the ETH key's treasury (a house sender of every EVM watcher).
    const treasury = treasuryAddressOf(xpubs.INVOICE_XPUB_ETH)!;
    await sendAs(treasury, invoice.address, '0.01');
    await mine(base, CONFIRMATIONS + 3);
    const head = Number(await base.publicClient.getBlockNumber());
    await waitFor('the watcher at the head', async () => {
      const [cursor] = await h.sql<{ height: string }[]>`select height from chain_cursors where chain = 'base'`;
      return cursor && Number(cursor.height) >= head ? cursor : undefined;
    }, 30_000);
    // A few more polls: reconciliation runs after the scan, at the newly confirmed height.
    await sleep(1_500);

    const payments = await h.sql<{ transaction_hash: string; asset: string; amount: string; reported_as: string | null }[]>`
      select transaction_hash, asset, amount::text, reported_as from payments where invoice_id = ${invoice.id} order by id`;
    const found = (p: { transaction_hash: string }) => (p.transaction_hash.startsWith('reconciled:') ? 'reconciliation' : 'block scan');
    expect(payments.map((p) => [found(p), p.asset, p.amount, p.reported_as])).toEqual([
      ['block scan', 'ETH', invoice.amountExpected, 'paid'],
      ['block scan', 'USDC', '5', 'uncredited'],
    ]);
    const credited = await h.sql<{ payload: Record<string, unknown> }[]>`
      select payload from outbox where event_type = 'invoice.late_payment' and payload->>'invoiceId' = ${invoice.id} and (payload->>'credited')::boolean`;
    expect(credited.map((e) => e.payload)).toEqual([]);
  }, 90_000);
});
