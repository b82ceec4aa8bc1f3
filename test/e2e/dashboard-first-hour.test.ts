/**
 * The traps of a merchant's first hour in the dashboard (issue 28), in Debian's Chromium against the
 * whole system: the one-time webhook secret at the top of the page, an invoice created from the
 * dashboard (through POST /api/invoice with the session), prices with their currency's minor
 * units and rates with sensible precision, a warning on live invoices priced from the static
 * table, the "Verify your email" form only where it belongs, each error said once, the payout
 * coin defaulting to one with a balance, and a failed webhook showing its next attempt.
 */
import type { Browser, Page } from 'playwright-core';
import { markEmailUnverified, markEmailVerifiedByEmail } from '../support/accounts';
import { launchBrowser } from '../support/browser';
import { apiKeyHeader, bearer, createProjectWithKey, GatewayClient, registerMerchant, type MerchantFixture } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';
import { eventually, Receiver } from './dashboard.support';

const DESKTOP = { width: 1280, height: 800 };
const UI_TIMEOUT = 15_000;

let system: BootedSystem;
let api: GatewayClient;
let browser: Browser;
let merchant: MerchantFixture;
// Every delivery fails; the next attempt is ten minutes away, so a failed delivery stays pending.
const failing = new Receiver(() => ({ status: 500 }));

beforeAll(async () => {
  await failing.start();
  system = await bootSystem({ env: { WEBHOOK_RETRY_SCHEDULE: '10m,10m', PASSWORD_HASH_MEMORY_KIB: '1024' } });
  api = new GatewayClient(system.gatewayUrl);
  browser = await launchBrowser();
  merchant = await registerMerchant(api, { name: 'First hour shop' });
  // Unverified, as the local developer `npm start` makes (signing up verifies the email, issue 27):
  // the first hour of a merchant who has not proven the address yet.
  await markEmailUnverified(system, merchant.merchantId);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await system?.stop();
  await failing.stop();
});

async function signedIn(): Promise<Page> {
  const context = await browser.newContext({ viewport: DESKTOP });
  const page = await context.newPage();
  page.setDefaultTimeout(UI_TIMEOUT);
  await page.goto(`${system.gatewayUrl}/dashboard/signin`);
  await page.getByLabel('Email').fill(merchant.email);
  await page.getByLabel('Password').fill(merchant.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Projects' }).waitFor();
  return page;
}

/** Whether the element is inside the visible part of the window now. */
function inViewport(page: Page, testId: string): Promise<boolean> {
  return page.getByTestId(testId).evaluate((el) => {
    const box = el.getBoundingClientRect();
    return box.top >= 0 && box.bottom <= window.innerHeight;
  });
}

test('the one-time webhook secret is shown at the top of the page, in view, above the project list', async () => {
  // Enough projects that the creation form sits far below the fold.
  for (let i = 0; i < 15; i++) await api.post('/api/merchant/projects', { name: `Older project ${i}`, environment: 'sandbox' }, { headers: bearer(merchant.token) });
  const page = await signedIn();
  await page.getByRole('heading', { name: 'Create a project' }).scrollIntoViewIfNeeded();
  await page.getByLabel('Project name').fill('Shop with a webhook');
  await page.getByLabel('Webhook URL').fill(failing.url);
  await page.getByRole('button', { name: 'Create project' }).click();
  const secret = page.getByTestId('webhook-secret');
  await secret.waitFor();
  expect(await secret.textContent()).toMatch(/^whsec_/);
  await eventually(async () => ((await inViewport(page, 'webhook-secret')) ? true : undefined), 5_000, 'the secret scrolled into view');
  // Above the list of projects, right under the page's heading.
  const order = await page.evaluate(() => {
    const notice = document.querySelector('[data-testid="project-created"]');
    const list = document.getElementById('your-projects');
    return notice && list ? notice.compareDocumentPosition(list) & Node.DOCUMENT_POSITION_FOLLOWING : 0;
  });
  expect(order).toBeTruthy();
  await page.context().close();
});

test('"Verify your email" is on the Projects page and a live project\'s API keys, never on Payouts or Invoices', async () => {
  const live = (await api.post('/api/merchant/projects', { name: 'Live shop', environment: 'live' }, { headers: bearer(merchant.token) })).body;
  const sandbox = (await api.post('/api/merchant/projects', { name: 'Sandbox shop', environment: 'sandbox' }, { headers: bearer(merchant.token) })).body;
  const page = await signedIn();
  const banner = page.getByRole('region', { name: 'Verify your email' });
  await banner.waitFor();
  for (const path of [`/projects/${sandbox.id}/payouts`, `/projects/${live.id}/payouts`, `/projects/${sandbox.id}/invoices`, `/projects/${sandbox.id}/keys`]) {
    await page.goto(`${system.gatewayUrl}/dashboard${path}`);
    await page.getByRole('heading', { level: 1 }).waitFor();
    await page.getByRole('heading', { level: 2 }).first().waitFor();
    expect({ path, banners: await banner.count(), codeFields: await page.getByLabel('Email verification code').count() }).toEqual({ path, banners: 0, codeFields: 0 });
  }
  await page.goto(`${system.gatewayUrl}/dashboard/projects/${live.id}/keys`);
  await banner.waitFor();
  await page.context().close();
});

test('an invoice created from the dashboard: the price with its minor units, the rate with sensible precision; a refusal said once', async () => {
  const sandbox = (await api.post('/api/merchant/projects', { name: 'Invoicing shop', environment: 'sandbox' }, { headers: bearer(merchant.token) })).body;
  const page = await signedIn();
  await page.goto(`${system.gatewayUrl}/dashboard/projects/${sandbox.id}/invoices`);
  const form = page.getByRole('region', { name: 'Create an invoice' });
  await form.getByLabel('Price', { exact: true }).fill('0');
  await form.getByLabel('Price currency').selectOption('EUR');
  await form.getByLabel('Paid in').selectOption('BTC');
  await form.getByLabel('Success URL').fill('https://shop.example/thanks');
  await form.getByLabel('Cancel URL').fill('https://shop.example/cart');
  await form.getByRole('button', { name: 'Create invoice' }).click();
  const alert = form.getByRole('alert');
  await alert.waitFor();
  // The rule's words appear once: in the field's line, not again in the detail above it.
  expect(((await alert.textContent()) ?? '').split('must be greater than 0').length - 1).toBe(1);

  await form.getByLabel('Price', { exact: true }).fill('19.9');
  await form.getByLabel('Order reference').fill('dash-1');
  await form.getByRole('button', { name: 'Create invoice' }).click();
  const fields = page.getByTestId('invoice-fields');
  await fields.waitFor();
  const text = (await fields.textContent()) ?? '';
  expect(text).toContain('19.90 EUR');
  expect(text).not.toContain('19.9 EUR');
  // Static table: 105000 USD per BTC, 1.14 USD per EUR → 92105.263157… EUR, shown with 2 decimals.
  expect(text).toContain('1 BTC = 92105.26 EUR');
  expect(text).toContain('dash-1');
  expect(await page.getByTestId('static-rate-warning').count()).toBe(0); // a sandbox invoice
  const invoices = (await api.get(`/api/merchant/projects/${sandbox.id}/invoices`, { headers: bearer(merchant.token) })).body;
  expect(invoices.items).toEqual([expect.objectContaining({ orderId: 'dash-1', priceAmount: 19.9, priceCurrency: 'EUR', payCurrency: 'BTC' })]);
  await page.goto(`${system.gatewayUrl}/dashboard/projects/${sandbox.id}/invoices`);
  await page.getByTestId('invoice-row').getByText('19.90 EUR').waitFor();
  await page.context().close();
});

test('an invoice on a chosen network: the picker offers the asset\'s networks from GET /api/currencies; the list and the page name the network', async () => {
  const sandbox = (await api.post('/api/merchant/projects', { name: 'Network shop', environment: 'sandbox' }, { headers: bearer(merchant.token) })).body;
  const page = await signedIn();
  await page.goto(`${system.gatewayUrl}/dashboard/projects/${sandbox.id}/invoices`);
  const form = page.getByRole('region', { name: 'Create an invoice' });
  await form.getByLabel('Paid in').selectOption('USDT');
  const network = form.getByLabel('Network', { exact: true });
  // USDT's networks in registry order, as customers know them; the first (its own) is preselected.
  const listed = (await api.get('/api/currencies')).body.currencies.filter((c: { currency: string }) => c.currency === 'USDT');
  await page.waitForFunction((n) => document.querySelectorAll('select option[value="tron"]').length > 0 && n > 0, listed.length);
  expect(await network.locator('option').evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value))).toEqual(listed.map((c: { network: string }) => c.network));
  expect(await network.inputValue()).toBe('ethereum');
  expect(await network.locator('option[value="bsc"]').textContent()).toBe('BNB Smart Chain (0x55d3…7955)');
  await network.selectOption('bsc');
  await form.getByLabel('Price', { exact: true }).fill('10');
  await form.getByLabel('Price currency').selectOption('USD');
  await form.getByLabel('Order reference').fill('dash-bsc');
  await form.getByLabel('Success URL').fill('https://shop.example/thanks');
  await form.getByLabel('Cancel URL').fill('https://shop.example/cart');
  await form.getByRole('button', { name: 'Create invoice' }).click();
  const fields = page.getByTestId('invoice-fields');
  await fields.getByTestId('invoice-network').waitFor();
  expect(await fields.getByTestId('invoice-network').textContent()).toBe('BNB Smart Chain bsc');
  const invoices = (await api.get(`/api/merchant/projects/${sandbox.id}/invoices`, { headers: bearer(merchant.token) })).body;
  expect(invoices.items).toEqual([expect.objectContaining({ orderId: 'dash-bsc', payCurrency: 'USDT', payNetwork: 'bsc' })]);
  await page.goto(`${system.gatewayUrl}/dashboard/projects/${sandbox.id}/invoices`);
  await page.getByTestId('invoice-row').getByTestId('invoice-network').getByText('on BNB Smart Chain').waitFor();
  await page.context().close();
});

test('POST /api/invoice with a session names a project of the merchant; a live one needs a verified email', async () => {
  const live = (await api.post('/api/merchant/projects', { name: 'Live invoicing', environment: 'live' }, { headers: bearer(merchant.token) })).body;
  const other = await registerMerchant(api);
  const othersProject = (await api.post('/api/merchant/projects', { name: 'Not yours', environment: 'sandbox' }, { headers: bearer(other.token) })).body;
  const body = { priceAmount: '20.00', priceCurrency: 'usd', payCurrency: 'eth', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' };
  const missing = await api.post('/api/invoice', body, { headers: bearer(merchant.token) });
  expect(missing.status).toBe(400);
  expect(missing.body.errors).toEqual([expect.objectContaining({ field: 'projectId' })]);
  // Another merchant's project, or none: 404 as if it did not exist (docs/architecture.md#errors).
  const foreign = await api.post('/api/invoice', { ...body, projectId: othersProject.id }, { headers: bearer(merchant.token) });
  expect([foreign.status, foreign.body.code, foreign.body.errors]).toEqual([404, 'not_found', [{ field: 'projectId', message: 'is not one of your projects' }]]);
  const unverified = await api.post('/api/invoice', { ...body, projectId: live.id }, { headers: bearer(merchant.token) });
  expect(unverified.status).toBe(403);
  expect(unverified.body.code).toBe('email_not_verified');
  // An API key's project may be named, never another one.
  const keyed = await createProjectWithKey(api, other, 'sandbox');
  expect((await api.post('/api/invoice', { ...body, projectId: keyed.id }, { headers: apiKeyHeader(keyed.key) })).status).toBe(201);
  const otherThanKeys = await api.post('/api/invoice', { ...body, projectId: othersProject.id }, { headers: apiKeyHeader(keyed.key) });
  expect([otherThanKeys.status, otherThanKeys.body.code, otherThanKeys.body.errors]).toEqual([404, 'not_found', [{ field: 'projectId', message: 'is not the project of this API key' }]]);

  await markEmailVerifiedByEmail(system, merchant.email);
  const created = await api.post('/api/invoice', { ...body, projectId: live.id }, { headers: bearer(merchant.token) });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({ priceCurrency: 'USD', payCurrency: 'ETH', projectName: 'Live invoicing' });

  // Priced from the static table under npm start's defaults: the live invoice's page says so.
  const page = await signedIn();
  await page.goto(`${system.gatewayUrl}/dashboard/projects/${live.id}/invoices/${created.body.id}`);
  const warning = page.getByTestId('static-rate-warning');
  await warning.waitFor();
  expect(await warning.textContent()).toContain('priced from the static rate table of 2025-06-01');
  expect(await page.getByTestId('invoice-fields').textContent()).toContain('20.00 USD');
  await page.context().close();
});

test('the payout coin defaults to one with a balance; a failed webhook shows when it is tried next', async () => {
  const shop = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: failing.url, name: 'USDT shop' });
  const invoice = await api.post(
    '/api/invoice',
    { priceAmount: '5.00', priceCurrency: 'USD', payCurrency: 'USDT', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
    { headers: apiKeyHeader(shop.key) },
  );
  expect(invoice.status).toBe(201);
  expect((await api.post(`/api/invoice/${invoice.body.id}/sandbox/pay`, undefined, { headers: apiKeyHeader(shop.key) })).status).toBe(200);
  await eventually(
    async () => {
      const balance = (await api.get('/api/payout/balance', { headers: apiKeyHeader(shop.key) })).body as { balances: Array<{ currency: string; available: number }> };
      return balance.balances.some((b) => b.currency === 'USDT' && b.available > 0) ? true : undefined;
    },
    15_000,
    'the USDT balance',
  );

  const page = await signedIn();
  await page.goto(`${system.gatewayUrl}/dashboard/projects/${shop.id}/payouts`);
  await page.getByTestId('balance-USDT-ethereum').waitFor();
  expect(await page.getByLabel('Currency', { exact: true }).inputValue()).toBe('USDT');
  // A choice of the merchant's stays.
  await page.getByLabel('Currency', { exact: true }).selectOption('ETH');
  expect(await page.getByLabel('Currency', { exact: true }).inputValue()).toBe('ETH');

  // The invoice.paid delivery failed once (500) and waits ten minutes for its next attempt.
  await eventually(async () => (failing.requests.length > 0 ? true : undefined), 15_000, 'the first delivery attempt');
  await page.goto(`${system.gatewayUrl}/dashboard/projects/${shop.id}/webhooks`);
  const row = page.getByTestId('delivery-row').filter({ hasText: 'invoice.paid' });
  await row.getByTestId('next-attempt').waitFor();
  const next = await row.getByTestId('next-attempt').locator('time').getAttribute('datetime');
  const due = new Date(next!).getTime() - Date.now();
  expect(due).toBeGreaterThan(5 * 60_000);
  expect(due).toBeLessThan(13 * 60_000);
  expect(await row.textContent()).toContain('500');
  await page.context().close();
});
