/**
 * Issue 7 in a real browser: the hosted checkout page of a sandbox invoice shows the amount and
 * address, its QR code decodes to a payment URI with the same address and amount, it switches to
 * the paid state without a reload when the invoice is paid through the API, it shows an expired
 * invoice as expired, an unknown id gets a 404 page, and nothing is fetched from third parties
 * (/docs: test/e2e/docs.test.ts).
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import jsQR from 'jsqr';
import { PNG } from 'pngjs';
import type { Browser, Page } from 'playwright-core';
import postgres from 'postgres';
import { markEmailVerified } from '../support/accounts';
import { launchBrowser } from '../support/browser';
import { apiKeyHeader, createProjectWithKey, expectProblem, GatewayClient, registerMerchant, type ProjectFixture } from '../support/http';
import { bootSystem, REPO_ROOT, type BootedSystem } from '../support/system';

const ARTIFACTS = path.join(REPO_ROOT, 'test-artifacts');
let system: BootedSystem;
let api: GatewayClient;
let browser: Browser;
let project: ProjectFixture;
let db: postgres.Sql;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  // Both started together; whichever succeeded is kept for afterAll even when the other failed,
  // so a missing browser never leaves a running system behind.
  const [booted, launched] = await Promise.allSettled([bootSystem({ env: { INVOICE_SWEEP_INTERVAL_MS: '200' } }), launchBrowser()]);
  if (booted.status === 'fulfilled') system = booted.value;
  if (launched.status === 'fulfilled') browser = launched.value;
  if (booted.status === 'rejected') throw booted.reason;
  if (launched.status === 'rejected') throw launched.reason;
  api = new GatewayClient(system.gatewayUrl);
  db = postgres(system.database.url, { max: 1, onnotice: () => undefined });
  project = await createProjectWithKey(api, await registerMerchant(api), 'sandbox');
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await db?.end();
  await system?.stop();
});

async function createInvoice(overrides: Record<string, unknown> = {}) {
  const res = await api.post(
    '/api/invoice',
    { priceAmount: '25.00', priceCurrency: 'EUR', payCurrency: 'BTC', successUrl: 'https://shop.example/thanks', cancelUrl: 'https://shop.example/cart', orderId: 'order-77', ...overrides },
    { headers: apiKeyHeader(project.key) },
  );
  if (res.status !== 201) throw new Error(`create invoice: ${res.status} ${res.text}`);
  return res.body;
}

/** A page that records every request it makes, to prove none leaves the gateway. */
async function openPage(width: number, height: number): Promise<{ page: Page; requests: string[]; navigations: string[] }> {
  const context = await browser.newContext({ viewport: { width, height }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const requests: string[] = [];
  const navigations: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('framenavigated', (f) => {
    if (f === page.mainFrame()) navigations.push(f.url());
  });
  return { page, requests, navigations };
}

function decodeQr(png: Buffer): string {
  const image = PNG.sync.read(png);
  const code = jsQR(new Uint8ClampedArray(image.data.buffer, image.data.byteOffset, image.data.length), image.width, image.height);
  if (!code) throw new Error('no QR code found in the screenshot');
  return code.data;
}

test('the checkout page shows amount, address and a QR code of the payment URI, then turns paid without a reload', async () => {
  const invoice = await createInvoice();
  const { page, requests, navigations } = await openPage(390, 844);
  await page.goto(`${system.gatewayUrl}/pay/${invoice.id}`);
  await page.waitForFunction(() => document.querySelector('[data-testid=address]')?.textContent !== '…');

  const amountText = (await page.textContent('[data-testid=amount]'))!.trim();
  const addressText = (await page.textContent('[data-testid=address]'))!.trim();
  expect(amountText).toBe(`${invoice.amountExpected} BTC`);
  expect(addressText).toBe(invoice.address);
  expect(await page.isVisible('#sandbox')).toBe(true);
  expect(await page.textContent('#fiat')).toBe('25.00 EUR'); // the currency's minor units
  expect(await page.textContent('#countdown')).toMatch(/^\d+:\d{2}(:\d{2})?$/);
  // The network, named by the amount, and the warning to send only on it (docs/networks.md).
  expect((await page.textContent('[data-testid=network]'))!.trim()).toBe('on Bitcoin');
  expect(await page.isVisible('[data-testid=network-warning]')).toBe(true);
  expect((await page.textContent('[data-testid=network-warning]'))!).toContain('Send only on the Bitcoin network');
  expect(await page.isVisible('[data-testid=token-contract]')).toBe(false); // a network's own coin

  await page.waitForFunction(() => (document.getElementById('qr') as HTMLImageElement).complete && (document.getElementById('qr') as HTMLImageElement).naturalWidth > 0);
  const uri = decodeQr(await page.locator('#qr').screenshot());
  const parsed = new URL(uri);
  expect(parsed.protocol).toBe('bitcoin:');
  expect(parsed.pathname).toBe(invoice.address);
  expect(Number(parsed.searchParams.get('amount'))).toBe(invoice.amountExpected);

  await page.screenshot({ path: path.join(ARTIFACTS, 'checkout-waiting-390x844.png'), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.screenshot({ path: path.join(ARTIFACTS, 'checkout-waiting-1280x800.png'), fullPage: true });

  const qrWhileWaiting = await fetch(`${system.gatewayUrl}/api/checkout/${invoice.id}/qr.svg`);
  expect([qrWhileWaiting.status, qrWhileWaiting.headers.get('content-type')]).toEqual([200, 'image/svg+xml']);
  const paid = await api.post(`/api/invoice/${invoice.id}/sandbox/pay`, undefined, { headers: apiKeyHeader(project.key) });
  expect(paid.status).toBe(200);
  // Paid: no QR code asks for the amount again (a kept image would have the customer pay twice).
  expectProblem(await api.get(`/api/checkout/${invoice.id}/qr.svg`), 404, 'not_found');
  await page.waitForSelector('#paid:not(.hidden)', { timeout: 10_000 });
  expect(await page.getAttribute('#success-link', 'href')).toBe('https://shop.example/thanks');
  expect(await page.isVisible('#pay')).toBe(false);
  expect(navigations).toHaveLength(1); // the first load only: no reload
  await page.screenshot({ path: path.join(ARTIFACTS, 'checkout-paid-1280x800.png'), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: path.join(ARTIFACTS, 'checkout-paid-390x844.png'), fullPage: true });

  const origin = new URL(system.gatewayUrl).origin;
  expect(requests.filter((u) => !u.startsWith(origin))).toEqual([]);
  await page.context().close();
});

test('a USDT invoice on BNB Smart Chain names the network prominently, warns to send only on it, shows the contract, and its QR code asks for 18-decimal units on chain 56', async () => {
  const merchant = await registerMerchant(api);
  // Live: the token contract and chain id of the main chain (a sandbox invoice pays on the test chain).
  await markEmailVerified(system, merchant.merchantId);
  const live = await createProjectWithKey(api, merchant, 'live');
  const res = await api.post(
    '/api/invoice',
    { priceAmount: '100.00', priceCurrency: 'USD', payCurrency: 'USDT', payNetwork: 'bsc', successUrl: 'https://shop.example/thanks', cancelUrl: 'https://shop.example/cart' },
    { headers: apiKeyHeader(live.key) },
  );
  expect(res.status).toBe(201);
  const invoice = res.body;
  const { page, requests } = await openPage(390, 844);
  await page.goto(`${system.gatewayUrl}/pay/${invoice.id}`);
  await page.waitForFunction(() => document.querySelector('[data-testid=address]')?.textContent !== '…');

  expect((await page.textContent('[data-testid=amount]'))!.trim()).toBe('100 USDT');
  expect((await page.textContent('[data-testid=network]'))!.trim()).toBe('on BNB Smart Chain');
  const network = page.locator('[data-testid=network] strong');
  // Prominent: bold and at least the body's size, right under the amount.
  expect(Number.parseFloat(await network.evaluate((e) => getComputedStyle(e).fontSize))).toBeGreaterThanOrEqual(16);
  expect(Number(await network.evaluate((e) => getComputedStyle(e).fontWeight))).toBeGreaterThanOrEqual(600);
  const warning = page.locator('[data-testid=network-warning]');
  expect(await warning.isVisible()).toBe(true);
  expect(await warning.getAttribute('role')).toBe('alert');
  expect((await warning.textContent())!).toBe('Send only on the BNB Smart Chain network. Money sent on any other network does not pay this invoice.');
  expect(await page.isVisible('[data-testid=token-contract]')).toBe(true);
  expect((await page.textContent('[data-testid=token-contract]'))!.trim()).toBe('USDT contract 0x55d398326f99059fF775485246999027B3197955');

  await page.waitForFunction(() => (document.getElementById('qr') as HTMLImageElement).complete && (document.getElementById('qr') as HTMLImageElement).naturalWidth > 0);
  expect(decodeQr(await page.locator('#qr').screenshot())).toBe(
    `ethereum:0x55d398326f99059fF775485246999027B3197955@56/transfer?address=${invoice.address}&uint256=100000000000000000000`,
  );
  await page.screenshot({ path: path.join(ARTIFACTS, 'checkout-bsc-usdt-390x844.png'), fullPage: true });
  const origin = new URL(system.gatewayUrl).origin;
  expect(requests.filter((u) => !u.startsWith(origin))).toEqual([]);
  await page.context().close();
});

test('an expired invoice shows the expired state with a link back to cancelUrl', async () => {
  const invoice = await createInvoice({ orderId: 'order-late' });
  // The lifetime is whole minutes; move this invoice's expiry into the past and let the sweeper run.
  await db`update invoice.invoices set created_at = now() - interval '2 hours', expired_at = now() - interval '1 second' where id = ${invoice.id}`;
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if ((await api.get(`/api/invoice/${invoice.id}`, { headers: apiKeyHeader(project.key) })).body.status === 'Expired') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const { page } = await openPage(390, 844);
  await page.goto(`${system.gatewayUrl}/pay/${invoice.id}`);
  await page.waitForSelector('#expired:not(.hidden)', { timeout: 10_000 });
  expect(await page.getAttribute('#cancel-link', 'href')).toBe('https://shop.example/cart');
  expect(await page.isVisible('#pay')).toBe(false);
  await page.screenshot({ path: path.join(ARTIFACTS, 'checkout-expired-390x844.png'), fullPage: true });
  await page.context().close();
});

test('an unknown or malformed invoice id gets a 404 page', async () => {
  const { page } = await openPage(390, 844);
  for (const id of ['6f1c3d1e-0000-4000-8000-000000000000', 'not-an-id']) {
    const res = await page.goto(`${system.gatewayUrl}/pay/${id}`);
    expect(res?.status()).toBe(404);
    expect(await page.textContent('h1')).toBe('Invoice not found');
  }
  await page.context().close();
});

test('the public checkout endpoint exposes only what the customer needs', async () => {
  const invoice = await createInvoice({ orderDescription: 'secret merchant note' });
  const res = await api.get(`/api/checkout/${invoice.id}`);
  expect(res.status).toBe(200);
  expect(Object.keys(res.body).sort()).toEqual(
    ['address', 'amountExpected', 'amountExpectedDecimal', 'amountReceived', 'amountReceivedDecimal', 'cancelUrl', 'createdAt', 'expiredAt', 'id', 'isSandbox', 'payCurrency', 'payNetwork', 'payNetworkLabel', 'paymentUri', 'priceAmount', 'priceCurrency', 'status', 'successUrl', 'tokenContract'].sort(),
  );
  expect(res.text).not.toContain('order-77');
  expect(res.text).not.toContain('secret merchant note');
  expect(res.text).not.toContain(project.id);
});

test('/favicon.ico, which browsers ask for on every page, answers 204 (no 404 in the page console)', async () => {
  const res = await fetch(`${system.gatewayUrl}/favicon.ico`);
  expect(res.status).toBe(204);
  expect(res.headers.get('cache-control')).toBe('public, max-age=86400');
});
