/**
 * An asset is paid on a network (docs/networks.md, issue 24), through the running service: the
 * optional payNetwork is resolved by the pay-method catalog (refusals name the networks that carry
 * the asset), stored, quoted with the entry's decimals, shown in the invoice, its payments, its
 * checkout (label, token contract, payment URI with the entry's chain id and base units) and in
 * every event; the idempotency fingerprint includes it; ListCurrencies lists the enabled pairs.
 */
import { EVM_NETWORKS } from '@coinvoice/chains/evm/networks';
import { Code } from '@coinvoice/runtime';
import { InvoiceStatus } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { createRequest, liveProject, publishedEvents, rejection, sandboxProject, startInvoiceHarness, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startInvoiceHarness();
});

afterAll(async () => {
  await h?.dispose();
});

const USDT_CARRIERS = 'ethereum, arbitrum, optimism, polygon, bsc, tron';

describe('CreateInvoice with payNetwork', () => {
  test('a live bsc USDT invoice priced 100.00 USD expects 100 USDT, i.e. 100·10^18 token units in the URI, on chain 56', async () => {
    const project = liveProject();
    const { invoice } = await h.client.createInvoice(createRequest(project, { priceAmount: '100.00', payCurrency: 'USDT', payNetwork: 'bsc' }));
    // The static table prices USDT at 1 USD; amounts keep USDT's 6 decimals on every network.
    expect(invoice).toMatchObject({ payCurrency: 'USDT', payNetwork: 'bsc', amountExpected: '100', rate: '1', confirmationsRequired: EVM_NETWORKS.bsc.confirmations });
    expect(invoice!.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    const [row] = await h.sql<{ pay_network: string }[]>`select pay_network from invoices where id = ${invoice!.id}`;
    expect(row?.pay_network).toBe('bsc');

    const { checkout } = await h.client.getCheckout({ invoiceId: invoice!.id });
    expect(checkout).toMatchObject({
      payNetwork: 'bsc',
      payNetworkLabel: 'BNB Smart Chain',
      tokenContract: '0x55d398326f99059fF775485246999027B3197955',
      paymentUri: `ethereum:0x55d398326f99059fF775485246999027B3197955@56/transfer?address=${invoice!.address}&uint256=100000000000000000000`,
    });
    expect((await h.client.getInvoice({ projectId: project.projectId, invoiceId: invoice!.id })).invoice?.payNetwork).toBe('bsc');
    const listed = await h.client.listInvoices({ projectId: project.projectId, pageSize: 10 });
    expect(listed.invoices.map((i) => i.payNetwork)).toEqual(['bsc']);
  });

  test('absent, payNetwork is the asset\'s default network, as before networks', async () => {
    const project = sandboxProject();
    const payNetworks = [];
    for (const payCurrency of ['BTC', 'LTC', 'ETH', 'USDT', 'USDC', 'TRX', 'POL', 'BNB']) {
      payNetworks.push((await h.client.createInvoice(createRequest(project, { payCurrency, priceAmount: '25.00' }))).invoice!.payNetwork);
    }
    expect(payNetworks).toEqual(['bitcoin', 'litecoin', 'ethereum', 'ethereum', 'ethereum', 'tron', 'polygon', 'bsc']);
    // Ethereum mainnet has no @chainId; the default USDT invoice keeps its 6-decimal units.
    const live = (await h.client.createInvoice(createRequest(liveProject(), { payCurrency: 'USDT', priceAmount: '2.50' }))).invoice!;
    const { checkout } = await h.client.getCheckout({ invoiceId: live.id });
    expect(checkout!.paymentUri).toBe(`ethereum:0xdAC17F958D2ee523a2206206994597C13D831ec7/transfer?address=${live.address}&uint256=2500000`);
  });

  test('USDT on tron: a Tron address, and a tron: URI naming the TRC-20 contract', async () => {
    const invoice = (await h.client.createInvoice(createRequest(liveProject(), { payCurrency: 'USDT', payNetwork: 'tron', priceAmount: '12.00' }))).invoice!;
    expect(invoice.address).toMatch(/^T[1-9A-HJ-NP-Za-km-z]{33}$/);
    const { checkout } = await h.client.getCheckout({ invoiceId: invoice.id });
    expect(checkout).toMatchObject({ payNetwork: 'tron', payNetworkLabel: 'Tron', tokenContract: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t' });
    expect(checkout!.paymentUri).toBe(`tron:${invoice.address}?amount=12&token=TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t`);
  });

  test('a native coin has no token contract; ETH on base names chain 8453', async () => {
    const invoice = (await h.client.createInvoice(createRequest(liveProject(), { payCurrency: 'ETH', payNetwork: 'base', priceAmount: '25.00' }))).invoice!;
    const { checkout } = await h.client.getCheckout({ invoiceId: invoice.id });
    expect(checkout!.tokenContract).toBeUndefined();
    expect(checkout!.payNetworkLabel).toBe('Base');
    expect(checkout!.paymentUri).toBe(`ethereum:${invoice.address}@8453?value=10000000000000000`);
  });

  test.each([
    ['USDT on base (base does not carry it)', 'USDT', 'base', `base does not carry USDT; USDT is taken on: ${USDT_CARRIERS}`],
    ['an unknown network', 'USDT', 'solana', `is not a network; USDT is taken on: ${USDT_CARRIERS}`],
    ['BTC on ethereum', 'BTC', 'ethereum', 'ethereum does not carry BTC; BTC is taken on: bitcoin'],
    ['a network in another letter case', 'ETH', 'Base', 'is not a network; ETH is taken on: ethereum, base, arbitrum, optimism'],
    ['an empty network', 'ETH', '', 'is required'],
  ])('%s is validation_failed on payNetwork naming the networks that carry the asset', async (_name, payCurrency, payNetwork, message) => {
    const project = sandboxProject();
    for (const validateOnly of [false, true]) {
      const err = await rejection(h.client.createInvoice(createRequest(project, { payCurrency, payNetwork, validateOnly })));
      expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed', violations: [{ field: 'payNetwork', message }] });
    }
    const [count] = await h.sql<{ n: number }[]>`select count(*)::int as n from invoices where project_id = ${project.projectId}`;
    expect(count?.n).toBe(0);
  });

  test('the idempotency fingerprint includes payNetwork: the same key with another network is idempotency_key_reused', async () => {
    const project = sandboxProject();
    const body = { idempotencyKey: 'net-1', orderId: 'o-net', payCurrency: 'USDT', payNetwork: 'polygon' };
    const first = await h.client.createInvoice(createRequest(project, body));
    const replay = await h.client.createInvoice(createRequest(project, body));
    expect(replay).toMatchObject({ idempotentReplay: true, invoice: { id: first.invoice!.id, payNetwork: 'polygon' } });
    const other = await rejection(h.client.createInvoice(createRequest(project, { ...body, payNetwork: 'arbitrum' })));
    expect(other).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'idempotency_key_reused' });
  });

  test('every event of the invoice carries its pay_network', async () => {
    const project = sandboxProject();
    const invoice = (await h.client.createInvoice(createRequest(project, { payCurrency: 'USDC', payNetwork: 'arbitrum', orderId: 'ev-net' }))).invoice!;
    await h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id });
    const paid = await waitForEvent('invoice.paid', invoice.id);
    expect(paid).toMatchObject({ status: 'Paid', currency: 'USDC', payNetwork: 'arbitrum' });
  });

  test('a sandbox USDT invoice on bsc is paid by simulation with its 6-decimal amount', async () => {
    const project = sandboxProject();
    const invoice = (await h.client.createInvoice(createRequest(project, { payCurrency: 'USDT', payNetwork: 'bsc', priceAmount: '10.00' }))).invoice!;
    expect(await rejection(h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id, amountReceived: '10.0000001' }))).toMatchObject({
      violations: [{ field: 'amountReceived', message: 'must have at most 6 decimal places for USDT' }],
    });
    const paid = await h.client.payInvoice({ projectId: project.projectId, invoiceId: invoice.id });
    expect(paid.invoice).toMatchObject({ status: InvoiceStatus.PAID, payNetwork: 'bsc', amountReceived: '10' });
  });

  test('a payment shows the network it arrived on', async () => {
    const project = liveProject();
    const invoice = (await h.client.createInvoice(createRequest(project, { payCurrency: 'USDC', payNetwork: 'base', priceAmount: '5.00' }))).invoice!;
    // A transfer recorded by a watcher (set up directly: the watchers have their own tests).
    await h.sql`
      insert into payments (chain, transaction_hash, output_index, invoice_id, address, asset, amount, confirmations, status)
      values ('ethereum', ${`0x${'ab'.repeat(32)}`}, 0, ${invoice.id}, ${invoice.address}, 'USDC', 5, 1, 'seen')`;
    const { invoice: read } = await h.client.getInvoice({ projectId: project.projectId, invoiceId: invoice.id });
    expect(read!.payNetwork).toBe('base');
    expect(read!.payments.map((p) => [p.asset, p.network])).toEqual([['USDC', 'ethereum']]);
  });
});

test('ListCurrencies lists every enabled pair with decimals, confirmations, minimum, contract and chain id', async () => {
  const { currencies } = await h.client.listCurrencies({});
  const usdt = currencies.filter((c) => c.currency === 'USDT').map((c) => c.network);
  expect(usdt).toEqual(['ethereum', 'arbitrum', 'optimism', 'polygon', 'bsc', 'tron']);
  expect(currencies.find((c) => c.currency === 'USDT' && c.network === 'bsc')).toMatchObject({
    name: 'Tether USD (BEP-20)',
    networkLabel: 'BNB Smart Chain',
    decimals: 6,
    baseUnitDecimals: 18,
    confirmations: EVM_NETWORKS.bsc.confirmations,
    minimumAmount: '0.000001',
    contract: '0x55d398326f99059fF775485246999027B3197955',
    chainId: 56n,
  });
  const btc = currencies.find((c) => c.currency === 'BTC');
  expect([btc?.network, btc?.contract, btc?.chainId]).toEqual(['bitcoin', undefined, undefined]);
  // USDC on Tron is taken only where its contract is configured (docs/networks.md).
  expect(currencies.some((c) => c.currency === 'USDC' && c.network === 'tron')).toBe(false);
});

describe('INVOICE_NETWORKS limits the networks', () => {
  let limited: Harness;

  beforeAll(async () => {
    limited = await startInvoiceHarness({ env: { INVOICE_NETWORKS: 'bitcoin,ethereum,tron' } });
  });

  afterAll(async () => {
    await limited?.dispose();
  });

  test('a network not enabled is refused naming the enabled networks that carry the asset; ListCurrencies omits it', async () => {
    const err = await rejection(limited.client.createInvoice(createRequest(sandboxProject(), { payCurrency: 'USDT', payNetwork: 'bsc' })));
    expect(err).toMatchObject({ code: 'validation_failed', violations: [{ field: 'payNetwork', message: 'USDT on bsc is not enabled here; USDT is taken on: ethereum, tron' }] });
    // POL's only network is off: even without payNetwork it cannot be taken.
    const pol = await rejection(limited.client.createInvoice(createRequest(sandboxProject(), { payCurrency: 'POL' })));
    expect(pol).toMatchObject({ violations: [{ field: 'payNetwork', message: 'POL on polygon is not enabled here; POL is not taken on any network here' }] });
    const { currencies } = await limited.client.listCurrencies({});
    expect([...new Set(currencies.map((c) => c.network))]).toEqual(['bitcoin', 'ethereum', 'tron']);
    const ok = await limited.client.createInvoice(createRequest(sandboxProject(), { payCurrency: 'USDT', payNetwork: 'tron' }));
    expect(ok.invoice?.payNetwork).toBe('tron');
  });
});

async function waitForEvent(type: string, invoiceId: string) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const found = (await publishedEvents(h, type, 1)).find((e) => e.payload.invoiceId === invoiceId);
    if (found) return found.payload;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no ${type} for ${invoiceId}`);
}
