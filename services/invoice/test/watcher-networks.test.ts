/**
 * The watcher across the EVM family (docs/networks.md), on REAL nodes: three anvil instances side by
 * side — "ethereum" (chain id 1), "base" (8453) and "bsc" (56) — each with USDT/USDC compiled by solc
 * (18 decimals on bsc, as the Binance-Peg tokens), the invoice service and the real `watch
 * <network>` role of each network on one database.
 *
 * - A Base USDC invoice paid on the Base node becomes Paid; one paid on the Ethereum node instead
 *   (the same address exists there) is a wrong-network payment: recorded on ethereum, reported once
 *   as invoice.late_payment (credited false, network ethereum, payNetwork base), never counted,
 *   never credited, listed for the treasury's sweep on ethereum.
 * - A bsc USDT invoice of 100.00 USD takes exact 18-decimal amounts: 100·10^18 base units pay it,
 *   one base unit less does not.
 * - `invoice watch <network>` refuses to start, with one line naming both values, when its node is
 *   another chain or a token's decimals() differs from the registry.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { startTestService, type TestService } from '../../../test/support/service';
import { deployTokens, mine, sendToken, sendTokenUnits, startAnvil, type Anvil, type Tokens } from '../../../test/support/anvil';
import { verifyEvmNode, evmNodeConfig, evmNodeSettings } from '@coinvoice/chains/evm/family';
import { EVM_NETWORKS } from '@coinvoice/chains/evm/networks';
import { loadConfig, loadServiceConfig } from '@coinvoice/runtime';
import { treasuryAddressOf } from '@coinvoice/chains/evm/treasury';
import { throwawayXpubs } from '../../../test/support/xpubs';
import { watcherService } from '../src/watcher/role';
import { houseSendersOf } from '../src/treasuries';
import { createRequest, liveProject, startInvoiceHarness, waitFor, type Harness } from './support/harness';
import { bareProcessEnv } from '../../../test/support/process-env';

const CONFIRMATIONS = 2;
/** bsc needs more here: a wrong-network payment on bsc must wait for bsc's count, not its invoice's. */
const BSC_CONFIRMATIONS = 3;
const CONFIRMATIONS_OF: Readonly<Record<string, number>> = { ethereum: CONFIRMATIONS, base: CONFIRMATIONS, bsc: BSC_CONFIRMATIONS };
const MAIN = path.resolve(__dirname, '..', 'dist', 'main.js');

let ethereum: Anvil;
let base: Anvil;
let bsc: Anvil;
let ethereumTokens: Tokens;
let baseTokens: Tokens;
let bscTokens: Tokens;
let h: Harness;
const watchers: TestService[] = [];

function nodeEnv(): Record<string, string> {
  const node = (prefix: string, anvil: Anvil, confirmations = CONFIRMATIONS) => ({
    [`${prefix}_RPC_URL`]: anvil.url,
    [`${prefix}_CHAIN_ID`]: String(anvil.chainId),
    [`${prefix}_CONFIRMATIONS`]: String(confirmations),
    [`${prefix}_POLL_MS`]: '100',
    [`${prefix}_RPC_TIMEOUT_MS`]: '5000',
  });
  return {
    ...node('CHAIN_ETHEREUM', ethereum),
    CHAIN_ETHEREUM_USDT_CONTRACT: ethereumTokens.usdt,
    CHAIN_ETHEREUM_USDC_CONTRACT: ethereumTokens.usdc,
    ...node('CHAIN_BASE', base),
    CHAIN_BASE_USDC_CONTRACT: baseTokens.usdc,
    ...node('CHAIN_BSC', bsc, BSC_CONFIRMATIONS),
    CHAIN_BSC_USDT_CONTRACT: bscTokens.usdt,
    CHAIN_BSC_USDC_CONTRACT: bscTokens.usdc,
  };
}

beforeAll(async () => {
  [ethereum, base, bsc] = await Promise.all([startAnvil({ chainId: 1 }), startAnvil({ chainId: 8453 }), startAnvil({ chainId: 56 })]);
  [ethereumTokens, baseTokens, bscTokens] = await Promise.all([deployTokens(ethereum), deployTokens(base), deployTokens(bsc, { decimals: 18 })]);
  const env = nodeEnv();
  h = await startInvoiceHarness({ env });
  for (const network of ['ethereum', 'base', 'bsc']) {
    watchers.push(await startTestService(watcherService(network), { database: h.svc.database, namespace: h.svc.namespace, env: { ...h.svc.env, ...env } }));
  }
}, 120_000);

afterAll(async () => {
  for (const watcher of watchers) await watcher.stop();
  await h?.dispose();
  await Promise.all([ethereum, base, bsc].map((anvil) => anvil?.stop()));
});

/**
 * A live invoice in `payCurrency` on `payNetwork`. CreateInvoice's payNetwork is the invoice API's
 * (docs/networks.md); where this branch's API still stores the default network, the row is set to
 * the network asked for and its confirmations (the address is the same on every EVM network).
 */
async function liveInvoice(payCurrency: 'USDT' | 'USDC', payNetwork: string, priceAmount: string) {
  const invoice = (await h.client.createInvoice(createRequest(liveProject(), { priceAmount, priceCurrency: 'USD', payCurrency, payNetwork }))).invoice!;
  const confirmations = CONFIRMATIONS_OF[payNetwork]!;
  await h.sql`update invoices set pay_network = ${payNetwork}, confirmations_required = ${confirmations} where id = ${invoice.id} and pay_network <> ${payNetwork}`;
  const [row] = await h.sql<{ pay_network: string; confirmations_required: number }[]>`select pay_network, confirmations_required from invoices where id = ${invoice.id}`;
  expect(row).toEqual({ pay_network: payNetwork, confirmations_required: confirmations });
  return invoice;
}

interface State {
  status: string;
  amount_received: string;
  payments: Array<{ chain: string; asset: string; amount: string; status: string; confirmations: number; reported_as: string | null }>;
  events: Array<{ type: string; payload: Record<string, unknown> }>;
}

/** The invoice, its payments and its events as of one snapshot (a watcher commits them together). */
async function state(invoiceId: string): Promise<State> {
  return h.sql.begin('isolation level repeatable read read only', async (sql) => {
    const [invoice] = await sql<{ status: string; amount_received: string }[]>`select status, amount_received::text from invoices where id = ${invoiceId}`;
    const payments = await sql<State['payments']>`
      select chain, asset, amount::text, status, confirmations, reported_as from payments where invoice_id = ${invoiceId} order by id`;
    const events = await sql<{ event_type: string; payload: Record<string, unknown> }[]>`
      select event_type, payload from outbox where payload->>'invoiceId' = ${invoiceId} order by seq`;
    return { ...invoice!, payments: [...payments], events: events.map((e) => ({ type: e.event_type, payload: e.payload })) };
  });
}

const until = (invoiceId: string, what: string, ok: (s: State) => boolean) =>
  waitFor(what, async () => {
    const s = await state(invoiceId);
    return ok(s) ? s : undefined;
  }, 30_000);

const types = (s: State) => s.events.map((e) => e.type);

test('a Base USDC invoice paid on Base is Paid; one paid on Ethereum instead is a wrong-network payment: reported once, never counted, never credited, swept on ethereum', async () => {
  const onBase = await liveInvoice('USDC', 'base', '10.00');
  const onEthereum = await liveInvoice('USDC', 'base', '10.00');
  expect(onBase.amountExpected).toBe('10');

  // The right network: Paid at the confirmation count, invoice.paid carrying payNetwork base.
  await sendToken(base, baseTokens.usdc, onBase.address, '10');
  await mine(base, CONFIRMATIONS);
  const paid = await until(onBase.id, 'the base payment Paid', (s) => s.status === 'Paid');
  expect(paid.payments).toEqual([expect.objectContaining({ chain: 'base', asset: 'USDC', amount: '10', reported_as: 'paid' })]);
  expect(paid.events.find((e) => e.type === 'invoice.paid')?.payload).toEqual(expect.objectContaining({ amount: '10', currency: 'USDC' }));

  // The same asset sent to the other invoice's address, on the Ethereum node.
  await sendToken(ethereum, ethereumTokens.usdc, onEthereum.address, '10');
  await mine(ethereum, CONFIRMATIONS);
  const wrong = await until(onEthereum.id, 'the wrong-network payment reported', (s) => types(s).includes('invoice.late_payment'));
  expect(wrong.status).toBe('Waiting');
  expect(wrong.amount_received).toBe('0');
  expect(wrong.payments).toEqual([expect.objectContaining({ chain: 'ethereum', asset: 'USDC', amount: '10', status: 'confirmed', reported_as: 'uncredited' })]);
  const late = wrong.events.find((e) => e.type === 'invoice.late_payment')!.payload;
  expect(late).toEqual(expect.objectContaining({ network: 'ethereum', payNetwork: 'base', currency: 'USDC', amount: '10', status: 'Waiting' }));
  // proto3 JSON leaves a false bool out: credited is false.
  expect(late.credited ?? false).toBe(false);

  // Reported exactly once, whatever the head does next; the invoice's status never moves for it.
  await mine(ethereum, 3);
  await until(onEthereum.id, 'more confirmations', (s) => (s.payments[0]?.confirmations ?? 0) >= CONFIRMATIONS + 3);
  const later = await state(onEthereum.id);
  expect(types(later).filter((t) => t === 'invoice.late_payment')).toHaveLength(1);
  expect(types(later).filter((t) => t !== 'invoice.late_payment')).toEqual([]);

  // The merchant sees it in the invoice's payments, with the network it arrived on.
  const shown = (await h.client.getInvoice({ projectId: onEthereum.projectId, invoiceId: onEthereum.id })).invoice!;
  expect(shown.payments.map((p) => [p.network, p.asset, p.amount])).toEqual([['ethereum', 'USDC', '10']]);

  // The ledger credits the base invoice only; the treasury's sweep intake lists the deposit on ethereum.
  const credits = (await h.client.listLedgerCredits({ afterInvoiceId: '', pageSize: 100 })).credits;
  expect(credits.filter((c) => c.invoiceId === onEthereum.id)).toEqual([]);
  expect(credits.filter((c) => c.invoiceId === onBase.id).map((c) => [c.currency, c.network, c.amount])).toEqual([['USDC', 'base', '10']]);
  // Live credits only, whatever rows an invoice has: the ledger's repair credits them to live balances.
  await h.sql`update invoices set environment = 'sandbox' where id = ${onBase.id}`;
  try {
    expect((await h.client.listLedgerCredits({ afterInvoiceId: '', pageSize: 100 })).credits.filter((c) => c.invoiceId === onBase.id)).toEqual([]);
  } finally {
    await h.sql`update invoices set environment = 'live' where id = ${onBase.id}`;
  }
  const onEthereumDeposits = (await h.client.listAccountedDeposits({ chain: 'ethereum', pageSize: 100 })).deposits;
  expect(onEthereumDeposits.filter((d) => d.invoiceId === onEthereum.id).map((d) => [d.chain, d.asset, d.amount, d.address])).toEqual([['ethereum', 'USDC', '10', onEthereum.address]]);
  const onBaseDeposits = (await h.client.listAccountedDeposits({ chain: 'base', pageSize: 100 })).deposits;
  expect(onBaseDeposits.map((d) => d.invoiceId)).toEqual([onBase.id]);

  // Paid on its own network afterwards, it is Paid by that money alone (the wrong-network 10 adds nothing).
  await sendToken(base, baseTokens.usdc, onEthereum.address, '10');
  await mine(base, CONFIRMATIONS);
  const nowPaid = await until(onEthereum.id, 'Paid on base', (s) => s.status === 'Paid');
  expect(nowPaid.amount_received).toBe('10');
  expect(nowPaid.events.find((e) => e.type === 'invoice.paid')?.payload).toEqual(expect.objectContaining({ amount: '10' }));
}, 90_000);

test('a wrong-network payment whose block leaves the chain before it confirms is orphaned and never reported', async () => {
  const invoice = await liveInvoice('USDC', 'base', '3.00');
  const snapshot = await ethereum.testClient.snapshot();
  await sendToken(ethereum, ethereumTokens.usdc, invoice.address, '3');
  await until(invoice.id, 'the wrong-network payment seen', (s) => s.payments[0]?.status === 'seen');
  await ethereum.testClient.revert({ id: snapshot });
  await mine(ethereum, CONFIRMATIONS + 2);
  const orphaned = await until(invoice.id, 'orphaned', (s) => s.payments[0]?.status === 'orphaned');
  expect(orphaned.payments).toEqual([expect.objectContaining({ chain: 'ethereum', reported_as: null, confirmations: 0 })]);
  expect(types(orphaned)).toEqual([]);
  expect(orphaned.status).toBe('Waiting');
}, 60_000);

test('a bsc USDT invoice of 100.00 USD takes exact 18-decimal amounts: one base unit short is not paid, 100·10^18 is', async () => {
  const short = await liveInvoice('USDT', 'bsc', '100.00');
  const exact = await liveInvoice('USDT', 'bsc', '100.00');
  expect(short.amountExpected).toBe('100');

  await sendTokenUnits(bsc, bscTokens.usdt, short.address, 100n * 10n ** 18n - 1n);
  await sendTokenUnits(bsc, bscTokens.usdt, exact.address, 100n * 10n ** 18n);
  await mine(bsc, BSC_CONFIRMATIONS);
  const paid = await until(exact.id, 'the exact amount Paid', (s) => s.status === 'Paid');
  expect(paid.payments).toEqual([expect.objectContaining({ chain: 'bsc', asset: 'USDT', amount: '100', status: 'confirmed' })]);
  const partial = await until(short.id, 'one unit short: PartiallyPaid', (s) => s.status === 'PartiallyPaid' && s.payments[0]?.status === 'confirmed');
  expect(partial.amount_received).toBe('99.999999999999999999');
  expect(partial.payments).toEqual([expect.objectContaining({ chain: 'bsc', amount: '99.999999999999999999' })]);
  expect(types(partial)).not.toContain('invoice.paid');
  expect(partial.events.find((e) => e.type === 'invoice.partially_paid')?.payload).toEqual(
    expect.objectContaining({ payNetwork: 'bsc', amount: '99.999999999999999999', amountRemaining: '0.000000000000000001' }),
  );
}, 60_000);

test("a wrong-network payment confirms with the count of the network it arrived on, not its invoice's", async () => {
  const invoice = await liveInvoice('USDC', 'base', '5.00');
  // 5 USDC on bsc: 5·10^18 base units of its 18-decimal USDC.
  await sendTokenUnits(bsc, bscTokens.usdc, invoice.address, 5n * 10n ** 18n);
  await mine(bsc, CONFIRMATIONS - 1);
  // base's count (2) reached, bsc's (3) not: still only seen, not reported.
  const atTwo = await until(invoice.id, 'two confirmations on bsc', (s) => s.payments[0]?.confirmations === CONFIRMATIONS);
  expect(atTwo.payments).toEqual([expect.objectContaining({ chain: 'bsc', asset: 'USDC', amount: '5', status: 'seen', reported_as: null })]);
  expect(types(atTwo)).toEqual([]);
  await mine(bsc, 1);
  const reported = await until(invoice.id, 'reported at bsc\'s count', (s) => types(s).includes('invoice.late_payment'));
  expect(reported.payments).toEqual([expect.objectContaining({ chain: 'bsc', status: 'confirmed', confirmations: BSC_CONFIRMATIONS, reported_as: 'uncredited' })]);
  expect(reported.events.find((e) => e.type === 'invoice.late_payment')?.payload).toEqual(expect.objectContaining({ network: 'bsc', payNetwork: 'base', amount: '5' }));
  expect(reported.status).toBe('Waiting');
}, 60_000);

/** `main.js watch <network>` as a process; the node check runs before any connection. */
function watch(network: string, env: Record<string, string>) {
  const result = spawnSync(process.execPath, [MAIN, 'watch', network], {
    env: bareProcessEnv({ APP_ENV: 'development', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', NATS_URL: 'nats://127.0.0.1:1', ...env }),
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: result.status, stderr: result.stderr.trim() };
}

test('`invoice watch base` pointed at a node of another chain refuses to start with one line naming both ids', () => {
  const { status, stderr } = watch('base', { CHAIN_BASE_RPC_URL: ethereum.url, CHAIN_BASE_USDC_CONTRACT: ethereumTokens.usdc });
  expect(status).toBe(1);
  expect(stderr.split('\n')).toHaveLength(1);
  expect(stderr).toBe('invoice watch base: failed to start: the node at CHAIN_BASE_RPC_URL is chain 1, but base is chain 8453 (CHAIN_BASE_CHAIN_ID)');
});

test('`invoice watch bsc` with a token whose decimals() differs from the registry refuses to start naming both', async () => {
  const sixDecimals = await deployTokens(bsc, { decimals: 6 });
  const { status, stderr } = watch('bsc', { CHAIN_BSC_RPC_URL: bsc.url, CHAIN_BSC_USDT_CONTRACT: sixDecimals.usdt, CHAIN_BSC_USDC_CONTRACT: bscTokens.usdc });
  expect(status).toBe(1);
  expect(stderr.split('\n')).toHaveLength(1);
  expect(stderr).toBe(
    `invoice watch bsc: failed to start: the USDT contract ${sixDecimals.usdt} (CHAIN_BSC_USDT_CONTRACT) has 6 decimals on the node at CHAIN_BSC_RPC_URL, but USDT on bsc has 18 (services/chains/src/evm/networks.ts)`,
  );
}, 60_000);

test('the start-up check passes a node of the configured chain with the registry decimals (and refuses a token address without a contract on the main chain id)', async () => {
  const config = (env: Record<string, string>) => evmNodeConfig(loadConfig(evmNodeSettings, env), 'bsc');
  await expect(verifyEvmNode(config({ CHAIN_BSC_RPC_URL: bsc.url, CHAIN_BSC_USDT_CONTRACT: bscTokens.usdt, CHAIN_BSC_USDC_CONTRACT: bscTokens.usdc }))).resolves.toBeUndefined();
  // The registry's mainnet contracts do not exist on anvil, which answers bsc's main chain id 56:
  // on the main chain the issuer's contract exists, so a missing one is a wrong setting.
  await expect(verifyEvmNode(config({ CHAIN_BSC_RPC_URL: bsc.url, CHAIN_BSC_USDC_CONTRACT: bscTokens.usdc }))).rejects.toThrow(
    `no contract at the USDT contract ${EVM_NETWORKS.bsc.tokens.USDT.mainnet} (CHAIN_BSC_USDT_CONTRACT) on the node at CHAIN_BSC_RPC_URL, which is bsc's main chain 56 (CHAIN_BSC_CHAIN_ID): USDT payments would go unseen`,
  );
  // The chain id is configuration: a bsc testnet node would be CHAIN_BSC_CHAIN_ID=97.
  await expect(verifyEvmNode(config({ CHAIN_BSC_RPC_URL: bsc.url, CHAIN_BSC_CHAIN_ID: '97' }))).rejects.toThrow(
    'the node at CHAIN_BSC_RPC_URL is chain 56, but bsc is chain 97 (CHAIN_BSC_CHAIN_ID)',
  );
});

test("an EVM watcher knows every EVM key's treasury as the house (a wrong-network deposit's sweep gas is no payment); other watchers know none", () => {
  const xpubs = throwawayXpubs();
  const config = loadServiceConfig(watcherService('bsc'), { APP_ENV: 'development', ...xpubs, ...nodeEnv() });
  const treasuries = ['ETH', 'USDT', 'USDC', 'POL', 'BNB'].map((coin) => treasuryAddressOf(xpubs[`INVOICE_XPUB_${coin}` as keyof typeof xpubs])!.toLowerCase());
  expect(treasuries.every((t) => /^0x[0-9a-f]{40}$/.test(t))).toBe(true);
  // bsc carries neither ETH nor USDT-on-ethereum, yet their treasuries top up and sweep there too (same keys).
  expect([...houseSendersOf('bsc', config)].sort()).toEqual([...new Set(treasuries)].sort());
  expect([...houseSendersOf('base', config)].sort()).toEqual([...new Set(treasuries)].sort());
  expect(houseSendersOf('bitcoin', config).size).toBe(0);
});
