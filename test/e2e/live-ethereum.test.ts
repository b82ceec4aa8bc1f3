/**
 * Live payments on Ethereum, end to end against a REAL node: anvil (npm
 * @foundry-rs/anvil-linux-amd64) with ERC-20 contracts compiled from source by solc, the whole
 * system booted as `npm start` boots it (with `watch ethereum` because CHAIN_ETHEREUM_RPC_URL is
 * set), invoices created and read through the gateway, webhooks received and verified with
 * standardwebhooks, balances read through the payout API. One anvil and one system for the file;
 * 3 confirmations and a 100 ms poll keep it fast.
 */
import { Decimal } from '@coinvoice/domain/money';
import { Webhook } from 'standardwebhooks';
import { parseEther, type Address, type Hash } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { markEmailVerified } from '../support/accounts';
import { createProjectWithKey, GatewayClient, registerMerchant, type ProjectFixture } from '../support/http';
import { deployTokens, forwardEthTwo, mine, mined, payTwo, sendEth, sendToken, startAnvil, tokenUnits, type Anvil, type Tokens } from '../support/anvil';
import { launchBrowser } from '../support/browser';
import { bootSystem, type BootedSystem } from '../support/system';
import { LiveShop, type LiveInvoice } from './live-ethereum.support';
import { deleteStreams, eventually, Receiver, type ReceivedRequest } from './webhooks.support';

const CONFIRMATIONS = 3;

let anvil: Anvil;
let tokens: Tokens;
let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;
let live: ProjectFixture;
let sandbox: ProjectFixture;
let merchantToken: string;

beforeAll(async () => {
  anvil = await startAnvil();
  tokens = await deployTokens(anvil);
  receiver = await new Receiver().start();
  system = await bootSystem({
    env: {
      CHAIN_ETHEREUM_RPC_URL: anvil.url,
      CHAIN_ETHEREUM_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_ETHEREUM_USDT_CONTRACT: tokens.usdt,
      CHAIN_ETHEREUM_USDC_CONTRACT: tokens.usdc,
      CHAIN_ETHEREUM_POLL_MS: '100',
      INVOICE_SWEEP_INTERVAL_MS: '200',
      WEBHOOK_RETRY_SCHEDULE: '200ms,300ms,300ms',
      PASSWORD_HASH_MEMORY_KIB: '1024',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
  const merchant = await registerMerchant(api);
  // Live keys need a verified email (issue 12); the emailed-code flow has its own tests.
  await markEmailVerified(system, merchant.merchantId);
  merchantToken = merchant.token;
  live = await createProjectWithKey(api, merchant, 'live', { webhookUrl: receiver.url });
  sandbox = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: receiver.url });
}, 120_000);

afterAll(async () => {
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver?.stop();
  await anvil?.stop();
});

const createInvoice = (project: ProjectFixture, payCurrency: string, priceAmount = '20.00') => new LiveShop(api, project).createInvoice(payCurrency, priceAmount);
const getInvoice = (id: string, project = live) => new LiveShop(api, project).getInvoice(id);
const invoiceReaches = (id: string, check: (invoice: LiveInvoice) => boolean, what: string, timeoutMs = 20_000) =>
  new LiveShop(api, live).invoiceReaches(id, check, what, timeoutMs);

/** The webhooks received for an invoice, verified with standardwebhooks (throws on a bad signature). */
function webhooksOf(invoiceId: string): Array<{ body: Record<string, unknown>; request: ReceivedRequest }> {
  const wh = new Webhook(live.webhookSecret);
  return receiver.requests
    .map((request) => ({ request, body: JSON.parse(request.body) as Record<string, unknown> }))
    .filter(({ body }) => body.invoiceId === invoiceId)
    .map(({ request, body }) => {
      wh.verify(request.body, {
        'webhook-id': String(request.headers['webhook-id']),
        'webhook-timestamp': String(request.headers['webhook-timestamp']),
        'webhook-signature': String(request.headers['webhook-signature']),
      });
      return { request, body };
    });
}

const paidHooks = (invoiceId: string) => webhooksOf(invoiceId).filter(({ body }) => body.status === 'Paid' && !('transactionHash' in body));

const liveBalance = (currency: string) => new LiveShop(api, live).balance(currency);
const balanceReaches = (currency: string, expected: Decimal) => new LiveShop(api, live).balanceReaches(currency, expected);

/** Nothing more arrives: waits a few poll rounds, then the count must still be what it was. */
async function settle(ms = 1_500): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

let ethCredited = new Decimal(0);
let usdtCredited = new Decimal(0);

test('ETH paid in full: Confirming at 1 confirmation, Paid at CHAIN_ETHEREUM_CONFIRMATIONS; one signed invoice.paid; live balance credited once', async () => {
  const invoice = await createInvoice(live, 'ETH');
  expect(invoice).toMatchObject({ status: 'Waiting', confirmationsRequired: CONFIRMATIONS, payments: [] });
  const hash = await sendEth(anvil, invoice.address, String(invoice.amountExpected));

  const confirming = await invoiceReaches(invoice.id, (i) => i.status === 'Confirming', 'Confirming');
  expect(confirming.payments).toEqual([
    { transactionHash: hash, amount: invoice.amountExpected, amountDecimal: invoice.amountExpectedDecimal, asset: 'ETH', network: 'ethereum', confirmations: 1, status: 'seen', detectedAt: expect.any(String) },
  ]);
  expect(confirming.amountReceived).toBe(invoice.amountExpected);
  const checkout = await api.get(`/api/checkout/${invoice.id}`);
  expect(checkout.body).toMatchObject({ status: 'Confirming', confirmations: 1, confirmationsRequired: CONFIRMATIONS, amountRemaining: 0 });

  await mine(anvil, 1);
  const two = await invoiceReaches(invoice.id, (i) => i.payments?.[0]?.confirmations === 2, '2 confirmations');
  expect(two.status).toBe('Confirming');
  expect(paidHooks(invoice.id)).toHaveLength(0);

  await mine(anvil, 1);
  const paid = await invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'Paid');
  expect(paid.payments?.[0]).toMatchObject({ confirmations: CONFIRMATIONS, status: 'confirmed' });
  const hooks = await receiver.waitFor(1, 15_000, (r) => r.body.includes(invoice.id) && r.body.includes('"status":"Paid"'));
  expect(JSON.parse(hooks[0]!.body)).toEqual({
    invoiceId: invoice.id,
    orderId: expect.any(String),
    status: 'Paid',
    amount: invoice.amountExpected,
    currency: 'ETH',
    environment: 'live',
    amountDecimal: invoice.amountExpectedDecimal,
    payNetwork: 'ethereum',
    occurredAt: expect.any(String),
  });
  const confirmingHooks = webhooksOf(invoice.id).filter(({ body }) => body.status === 'Confirming');
  expect(confirmingHooks.map(({ body }) => body)).toEqual([
    expect.objectContaining({ status: 'Confirming', amount: invoice.amountExpected, currency: 'ETH', environment: 'live', confirmations: 1, confirmationsRequired: CONFIRMATIONS }),
  ]);

  ethCredited = ethCredited.plus(invoice.amountExpectedDecimal);
  await balanceReaches('ETH', ethCredited);
  // More confirmations change nothing; past the finality depth (3 × 3) the payment is final.
  await mine(anvil, 6);
  await settle();
  expect(paidHooks(invoice.id)).toHaveLength(1);
  expect((await liveBalance('ETH')).toFixed()).toBe(ethCredited.toFixed());
  await invoiceReaches(invoice.id, (i) => i.payments?.[0]?.status === 'final', 'payment final');
});

test('USDT half, then the rest: PartiallyPaid (amountReceived = half, remaining shown) → Confirming → Paid; credited once', async () => {
  const invoice = await createInvoice(live, 'USDT', '20.00');
  const half = (invoice.amountExpected / 2).toFixed(6);
  await sendToken(anvil, tokens.usdt, invoice.address, half);
  const partial = await invoiceReaches(invoice.id, (i) => i.status === 'PartiallyPaid', 'PartiallyPaid');
  expect(partial.amountReceived).toBe(Number(half));
  const checkout = await api.get(`/api/checkout/${invoice.id}`);
  expect(checkout.body).toMatchObject({ status: 'PartiallyPaid', amountReceived: Number(half), amountRemaining: Number((invoice.amountExpected - Number(half)).toFixed(6)) });
  // The wallet link and QR code ask for the rest, not the whole price again.
  const restUnits = tokenUnits(invoice.amountExpectedDecimal) - tokenUnits(half);
  expect(checkout.body.paymentUri).toBe(`ethereum:${tokens.usdt}@${anvil.chainId}/transfer?address=${invoice.address}&uint256=${restUnits}`);
  await eventually(async () => (webhooksOf(invoice.id).some(({ body }) => body.status === 'PartiallyPaid') ? true : undefined), 15_000, 'partially_paid webhook');

  const rest = (invoice.amountExpected - Number(half)).toFixed(6);
  await sendToken(anvil, tokens.usdt, invoice.address, rest);
  await invoiceReaches(invoice.id, (i) => i.status === 'Confirming', 'Confirming');
  await mine(anvil, CONFIRMATIONS);
  const paid = await invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'Paid');
  expect(paid.amountReceived).toBe(invoice.amountExpected);
  expect(paid.payments?.map((p) => p.asset)).toEqual(['USDT', 'USDT']);
  usdtCredited = usdtCredited.plus(invoice.amountExpectedDecimal);
  await balanceReaches('USDT', usdtCredited);
  await receiver.waitFor(1, 15_000, (r) => r.body.includes(invoice.id) && r.body.includes('"status":"Paid"'));
  expect(paidHooks(invoice.id)).toHaveLength(1);
});

test('USDT overpayment: Paid, amountReceived > amountExpected, credited in full', async () => {
  const invoice = await createInvoice(live, 'USDT', '10.00');
  const over = (invoice.amountExpected + 2.5).toFixed(6);
  await sendToken(anvil, tokens.usdt, invoice.address, over);
  await mine(anvil, CONFIRMATIONS);
  const paid = await invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'Paid');
  expect(paid.amountReceived).toBe(Number(over));
  expect(paid.amountReceived).toBeGreaterThan(paid.amountExpected);
  usdtCredited = usdtCredited.plus(over);
  await balanceReaches('USDT', usdtCredited);
  const hooks = await receiver.waitFor(1, 15_000, (r) => r.body.includes(invoice.id) && r.body.includes('"status":"Paid"'));
  expect(JSON.parse(hooks[0]!.body)).toMatchObject({ amount: Number(over), currency: 'USDT', environment: 'live' });
});

test('one transaction paying two invoices (two Transfer logs) credits both', async () => {
  const a = await createInvoice(live, 'USDT', '5.00');
  const b = await createInvoice(live, 'USDT', '7.00');
  const hash = await payTwo(anvil, tokens, tokens.usdt, a.address, a.amountExpected.toFixed(6), b.address, b.amountExpected.toFixed(6));
  await mine(anvil, CONFIRMATIONS);
  const paidA = await invoiceReaches(a.id, (i) => i.status === 'Paid', 'Paid');
  const paidB = await invoiceReaches(b.id, (i) => i.status === 'Paid', 'Paid');
  expect(paidA.payments?.[0]?.transactionHash).toBe(hash);
  expect(paidB.payments?.[0]?.transactionHash).toBe(hash);
  usdtCredited = usdtCredited.plus(a.amountExpectedDecimal).plus(b.amountExpectedDecimal);
  await balanceReaches('USDT', usdtCredited);
});

test('a reorg removing a Confirming payment: back to Waiting with invoice.reopened; re-mined, it confirms again; credited once', async () => {
  const invoice = await createInvoice(live, 'ETH', '15.00');
  const snapshot = await anvil.testClient.snapshot();
  // The signed transaction is kept so the very same transaction can be mined again after the reorg.
  const request = await anvil.wallet.prepareTransactionRequest({ to: invoice.address as `0x${string}`, value: parseEther(invoice.amountExpectedDecimal) });
  const signed = await anvil.wallet.signTransaction(request);
  const hash: Hash = await anvil.publicClient.sendRawTransaction({ serializedTransaction: signed });
  await mined(anvil, hash);
  await invoiceReaches(invoice.id, (i) => i.status === 'Confirming', 'Confirming');

  await anvil.testClient.revert({ id: snapshot });
  await mine(anvil, 2); // the other branch is longer than ours was
  const reopened = await invoiceReaches(invoice.id, (i) => i.status === 'Waiting', 'back to Waiting');
  expect(reopened.amountReceived).toBe(0);
  expect(reopened.payments).toEqual([expect.objectContaining({ transactionHash: hash, status: 'orphaned', confirmations: 0 })]);
  await eventually(
    async () => (webhooksOf(invoice.id).some(({ body }) => 'previousStatus' in body && body.status === 'Waiting' && body.previousStatus === 'Confirming') ? true : undefined),
    15_000,
    'invoice.reopened webhook',
  );

  await mined(anvil, await anvil.publicClient.sendRawTransaction({ serializedTransaction: signed }));
  await mine(anvil, CONFIRMATIONS - 1);
  const paid = await invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'Paid after re-mining');
  expect(paid.payments).toEqual([expect.objectContaining({ transactionHash: hash, status: 'confirmed', confirmations: CONFIRMATIONS })]);
  expect(paid.amountReceived).toBe(invoice.amountExpected);
  ethCredited = ethCredited.plus(invoice.amountExpectedDecimal);
  await balanceReaches('ETH', ethCredited);
  await settle();
  expect(paidHooks(invoice.id)).toHaveLength(1);
  expect((await liveBalance('ETH')).toFixed()).toBe(ethCredited.toFixed());
});

test('USDC sent to a USDT invoice is recorded and reported, not credited; a transfer to an address we never issued is ignored', async () => {
  const invoice = await createInvoice(live, 'USDT', '10.00');
  const usdcBefore = await liveBalance('USDC');
  const hash = await sendToken(anvil, tokens.usdc, invoice.address, '10');
  const stranger = '0x000000000000000000000000000000000000dEaD';
  await sendToken(anvil, tokens.usdt, stranger, '3');
  await sendEth(anvil, stranger, '0.01');
  await mine(anvil, CONFIRMATIONS);
  const recorded = await invoiceReaches(invoice.id, (i) => i.payments?.[0]?.status === 'confirmed', 'USDC payment confirmed');
  expect(recorded.status).toBe('Waiting');
  expect(recorded.amountReceived).toBe(0);
  expect(recorded.payments).toEqual([expect.objectContaining({ transactionHash: hash, asset: 'USDC', amount: 10 })]);
  const report = await eventually(async () => webhooksOf(invoice.id).find(({ body }) => body.transactionHash === hash), 15_000, 'late_payment report');
  expect(report.body).toMatchObject({ amount: 10, currency: 'USDC', credited: false, environment: 'live' });
  await settle();
  expect((await liveBalance('USDC')).toFixed()).toBe(usdcBefore.toFixed());
  expect((await liveBalance('USDT')).toFixed()).toBe(usdtCredited.toFixed());
});

test('ETH reaching two invoices as internal transfers of one contract call (no transaction to them) is found by balance reconciliation and pays both', async () => {
  const a = await createInvoice(live, 'ETH', '4.00');
  const b = await createInvoice(live, 'ETH', '6.00');
  await forwardEthTwo(anvil, tokens, a.address, String(a.amountExpected), b.address, String(b.amountExpected));
  await mine(anvil, CONFIRMATIONS + 1);
  for (const invoice of [a, b]) {
    const paid = await invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'Paid by reconciliation');
    expect(paid.amountReceived).toBe(invoice.amountExpected);
    expect(paid.payments).toEqual([expect.objectContaining({ asset: 'ETH', amount: invoice.amountExpected, transactionHash: expect.stringMatching(/^reconciled:0x/) })]);
  }
  ethCredited = ethCredited.plus(a.amountExpectedDecimal).plus(b.amountExpectedDecimal);
  await balanceReaches('ETH', ethCredited);
  const watcher = system.current()['watch-ethereum'];
  const metrics = await (await fetch(`${watcher?.adminUrl}/metrics`)).text();
  expect(metrics).toMatch(/^watcher_reconciliation_mismatches_total\{chain="ethereum",asset="ETH"\} [2-9]/m);
  expect(metrics).toMatch(/^watcher_payments\{chain="ethereum",status="final"\} [1-9]/m);
  expect(metrics).toMatch(/^watcher_head_lag_blocks\{chain="ethereum"\} \d+/m);
});

test('a payment arriving without a transaction of its own AFTER the address was swept is still found and credited (docs/watcher.md#what-left-an-address)', async () => {
  const invoice = await createInvoice(live, 'ETH', '5.00');
  const elsewhere = privateKeyToAddress(generatePrivateKey());
  await forwardEthTwo(anvil, tokens, invoice.address, String(invoice.amountExpected), elsewhere, '0.001');
  await mine(anvil, CONFIRMATIONS + 1);
  await invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'Paid by reconciliation');
  ethCredited = ethCredited.plus(invoice.amountExpectedDecimal);
  await balanceReaches('ETH', ethCredited);

  // A sweep: nearly everything leaves the deposit address (what the treasury's sweep does; here
  // the address is impersonated on anvil instead of signed for).
  const address = invoice.address as Address;
  const balance = await anvil.publicClient.getBalance({ address });
  const maxFeePerGas = 5_000_000_000n;
  await anvil.testClient.impersonateAccount({ address });
  try {
    const sweep = await anvil.wallet.sendTransaction({ account: address, chain: null, to: elsewhere, value: balance - 21_000n * maxFeePerGas, gas: 21_000n, maxFeePerGas, maxPriorityFeePerGas: 1_000_000_000n });
    await mined(anvil, sweep);
  } finally {
    await anvil.testClient.stopImpersonatingAccount({ address });
  }
  await mine(anvil, CONFIRMATIONS + 1);
  // Then a customer's contract wallet pays 0.001 ETH more, as an internal transfer: far less than
  // what was swept out, so balance minus recorded payments alone stays negative.
  await forwardEthTwo(anvil, tokens, invoice.address, '0.001', elsewhere, '0.001');
  await mine(anvil, CONFIRMATIONS + 1);
  const found = await invoiceReaches(invoice.id, (i) => i.payments?.length === 2, 'the late internal transfer recorded', 30_000);
  expect(found.payments).toEqual([
    expect.objectContaining({ asset: 'ETH', amount: invoice.amountExpected }),
    expect.objectContaining({ asset: 'ETH', amount: 0.001, transactionHash: expect.stringMatching(/^reconciled:0x/) }),
  ]);
  expect(found.status).toBe('Paid');
  // Credited to the merchant like any late payment in the invoice's asset.
  ethCredited = ethCredited.plus('0.001');
  await balanceReaches('ETH', ethCredited);
});

test('the project\'s paymentTolerancePercent (fixed on each invoice at creation): 99.5 % of the amount pays with 1 % tolerance', async () => {
  const patched = await api.patch(`/api/merchant/projects/${live.id}`, { paymentTolerancePercent: 1 }, { headers: { authorization: `Bearer ${merchantToken}` } });
  expect(patched.status).toBe(200);
  expect(patched.body.paymentTolerancePercent).toBe(1);
  const invalid = await api.patch(`/api/merchant/projects/${live.id}`, { paymentTolerancePercent: 5.5 }, { headers: { authorization: `Bearer ${merchantToken}` } });
  expect(invalid.status).toBe(400);
  // A new key of the project: its first use asks auth, which answers the new tolerance.
  const key = await api.post(`/api/merchant/projects/${live.id}/api-keys`, { name: 'tolerant' }, { headers: { authorization: `Bearer ${merchantToken}` } });
  expect(key.status).toBe(201);
  const tolerant = await createInvoice({ ...live, key: key.body.key }, 'USDT', '50.00');
  const short = (tolerant.amountExpected * 0.995).toFixed(6);
  await sendToken(anvil, tokens.usdt, tolerant.address, short);
  await mine(anvil, CONFIRMATIONS);
  const paid = await invoiceReaches(tolerant.id, (i) => i.status === 'Paid', 'Paid within tolerance');
  expect(paid.amountReceived).toBe(Number(short));
  usdtCredited = usdtCredited.plus(short);
  await balanceReaches('USDT', usdtCredited);
  await api.patch(`/api/merchant/projects/${live.id}`, { paymentTolerancePercent: 0 }, { headers: { authorization: `Bearer ${merchantToken}` } });
});

test('the checkout page shows the remaining amount while partially paid, "N of M" confirmations, then Paid', async () => {
  const invoice = await createInvoice(live, 'USDT', '12.00');
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
    await page.goto(`${system.gatewayUrl}/pay/${invoice.id}`);
    await page.waitForSelector('#pay:not(.hidden)');
    const half = (invoice.amountExpected / 2).toFixed(6);
    const rest = (invoice.amountExpected - Number(half)).toFixed(6);
    await sendToken(anvil, tokens.usdt, invoice.address, half);
    await page.waitForFunction((text) => document.getElementById('status')?.textContent?.includes(text), `${Number(rest)} USDT remaining`, { timeout: 20_000 });
    expect(await page.textContent('#amount')).toBe(`${Number(rest)} USDT`);
    // The wallet link and the QR code it shows ask for the rest.
    const restUnits = `uint256=${tokenUnits(rest)}`;
    expect(await page.getAttribute('#wallet-link', 'href')).toContain(restUnits);
    expect(await page.getAttribute('#qr', 'alt')).toContain(restUnits);
    expect(await page.getAttribute('#qr', 'src')).toContain('/qr.svg?for=');
    await sendToken(anvil, tokens.usdt, invoice.address, rest);
    await page.waitForSelector('#confirming:not(.hidden)', { timeout: 20_000 });
    expect(await page.textContent('#confirmations')).toBe(`1 of ${CONFIRMATIONS}`);
    await mine(anvil, 1);
    await page.waitForFunction((text) => document.getElementById('confirmations')?.textContent === text, `2 of ${CONFIRMATIONS}`, { timeout: 20_000 });
    await mine(anvil, 1);
    await page.waitForSelector('#paid:not(.hidden)', { timeout: 20_000 });
    expect(await page.isVisible('#confirming')).toBe(false);
    expect(await page.textContent('#received')).toBe(`${invoice.amountExpected} USDT`);
  } finally {
    await browser.close();
  }
  usdtCredited = usdtCredited.plus(invoice.amountExpectedDecimal);
});

test('sandbox invoices are never watched: ETH sent to a sandbox address changes nothing', async () => {
  const invoice = await createInvoice(sandbox, 'ETH');
  expect(invoice).not.toHaveProperty('payments');
  expect(invoice).not.toHaveProperty('confirmationsRequired');
  await sendEth(anvil, invoice.address, String(invoice.amountExpected));
  await mine(anvil, CONFIRMATIONS);
  await settle();
  const after = await getInvoice(invoice.id, sandbox);
  expect(after.status).toBe('Waiting');
  expect(after.amountReceived).toBe(0);
});
