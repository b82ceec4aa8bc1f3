/**
 * Issue 23 in a real browser (Debian's Chromium through playwright-core) against the whole system:
 * an operator presses Approve in the operator queue, opens the Treasury page (the network's
 * address, balances and why they are unknown, deposits awaiting sweep, the approval queue, which
 * they work from there too) and pauses and resumes the network; a merchant sets an auto-sweep
 * destination on the project's page and confirms it with the emailed code. Every page is checked
 * for console errors, failed requests and unlabelled controls.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import postgres from 'postgres';
import { codeInMail, mailText } from '../../deploy/local/src/mailbox';
import { launchBrowser, openWatchedTab } from '../support/browser';
import { apiKeyHeader, createProjectWithKey, GatewayClient, registerMerchant, type MerchantFixture } from '../support/http';
import { grantOperator } from '../support/operators';
import { publishLivePayment } from '../support/events';
import { bootSystem, type BootedSystem } from '../support/system';
import { addressFor, deleteStreams, emailedCode, eventually, mailboxDir } from './dashboard.support';

const UI_TIMEOUT = 15_000;
const OPERATOR_EMAIL = `ops-${randomUUID().slice(0, 8)}@coinvoice.test`;
const OPERATOR_PASSWORD = 'operator-password-1';

let system: BootedSystem;
let api: GatewayClient;
let browser: Browser;
let db: postgres.Sql;
let operator: MerchantFixture;

beforeAll(async () => {
  const [booted, launched] = await Promise.allSettled([bootSystem({ env: { PASSWORD_HASH_MEMORY_KIB: '1024', PAYOUT_AUTO_MAX_USDT: '1' } }), launchBrowser()]);
  if (booted.status === 'fulfilled') system = booted.value;
  if (launched.status === 'fulfilled') browser = launched.value;
  if (booted.status === 'rejected') throw booted.reason;
  if (launched.status === 'rejected') throw launched.reason;
  api = new GatewayClient(system.gatewayUrl);
  db = postgres(system.database.url, { max: 2, onnotice: () => undefined });
  operator = await grantOperator(system, api, OPERATOR_EMAIL, OPERATOR_PASSWORD);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await db?.end();
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
});

/** A tab recording console errors, page errors, failed requests and HTTP errors. */
const openTab = () => openWatchedTab(browser, { timeoutMs: UI_TIMEOUT });

/** Inputs without a label, buttons without a name. */
async function unlabelled(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const problems: string[] = [];
    for (const el of Array.from(document.querySelectorAll('input, select, textarea')) as HTMLInputElement[]) {
      if (el.type === 'hidden') continue;
      if (!Array.from(el.labels ?? []).some((l) => l.textContent?.trim()) && !el.getAttribute('aria-label')) problems.push(el.outerHTML.slice(0, 120));
    }
    for (const el of Array.from(document.querySelectorAll('button, a[href]'))) {
      if (!el.textContent?.trim() && !el.getAttribute('aria-label')) problems.push(el.outerHTML.slice(0, 120));
    }
    return problems;
  });
}

async function signIn(page: Page, email: string, password: string): Promise<void> {
  await page.goto(`${system.gatewayUrl}/dashboard/signin`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Projects' }).waitFor();
}

/** The code of the newest auto-sweep email naming `address`, from the system's mailbox folder. */
async function autoSweepCode(address: string): Promise<string> {
  return eventually(
    async () => {
      const dir = mailboxDir(system);
      if (!existsSync(dir)) return undefined;
      for (const file of readdirSync(dir).filter((f) => f.endsWith('.eml')).sort().reverse()) {
        const text = mailText(readFileSync(path.join(dir, file), 'utf8'));
        if (text.includes('auto-sweep') && text.includes(address)) return codeInMail(text);
      }
      return undefined;
    },
    20_000,
    `the auto-sweep email naming ${address}`,
  );
}

test('an operator approves from the queue, works the Treasury page (approval queue, pause, resume); a merchant sets an auto-sweep with the code', async () => {
  const merchant = await registerMerchant(api);
  const live = await createProjectWithKey(api, merchant, 'live', { name: 'Treasury shop' });
  await publishLivePayment(system, { projectId: live.id, currency: 'USDT', amount: '500' });
  await eventually(async () => ((await api.get('/api/payout/balance', { headers: apiKeyHeader(live.key) })).body.balances.length > 0 ? true : undefined), UI_TIMEOUT, 'the live balance');
  const pending = async (amount: number) => {
    const res = await api.post('/api/payout/request', { amount, currency: 'USDT', address: addressFor('USDT', 'mainnet') }, { headers: apiKeyHeader(live.key) });
    expect(res.status).toBe(201);
    const verified = await api.post('/api/payout/verify', { payoutId: res.body.id, code: await emailedCode(system, res.body.id) }, { headers: apiKeyHeader(live.key) });
    expect(verified.body.status).toBe('Pending');
    return res.body.id as string;
  };
  const inQueue = await pending(25);
  const onTreasury = await pending(40);
  // A payout the treasury's processor is sending (claimed, its transaction stored and broadcast).
  const inFlight = await pending(10);
  const inFlightHash = `0x${randomBytes(32).toString('hex')}`;
  await db`
    update payout.payouts set claimed_at = now(), claimed_by = 'processor:ethereum', transaction_hash = ${inFlightHash}, confirmations = 1
    where id = ${inFlight}`;
  const treasuryAddress = addressFor('ETH', 'mainnet');
  await db`insert into payout.treasury_networks (network, address) values ('ethereum', ${treasuryAddress})`;
  await db`
    insert into payout.sweep_tasks (payment_id, invoice_id, project_id, network, asset, deposit_address, address_index, amount)
    values (${`ethereum:0x${randomBytes(32).toString('hex')}:0`}, ${randomUUID()}, ${live.id}, 'ethereum', 'USDT', ${addressFor('ETH', 'mainnet')}, 3, 12500000)`;

  const tab = await openTab();
  try {
    const { page } = tab;
    await signIn(page, OPERATOR_EMAIL, OPERATOR_PASSWORD);
    await page.getByRole('link', { name: 'Operator queue' }).click();
    const row = page.locator(`[data-testid=queue-row][data-payout-id="${inQueue}"]`);
    await row.getByRole('button', { name: 'Approve 25 USDT' }).click();
    await row.getByTestId('approved').waitFor();
    expect(await row.getByRole('button', { name: 'Approve 25 USDT' }).count()).toBe(0);
    // The network the payout is sent on (issue 24).
    expect(await row.textContent()).toContain('on ethereum');
    expect((await api.get(`/api/payout/${inQueue}`, { headers: apiKeyHeader(live.key) })).body.approvedAt).toEqual(expect.any(String));
    // The one the processor sends shows its transaction and offers neither Complete nor Reject.
    const sending = page.locator(`[data-testid=queue-row][data-payout-id="${inFlight}"]`);
    await sending.getByTestId('sent-by-processor').getByText(inFlightHash).waitFor();
    expect(await sending.getByTestId('sent-by-processor').textContent()).toMatch(/, 1 confirmation$/);
    expect(await sending.getByRole('button', { name: /Complete|Reject|Start sending/ }).count()).toBe(0);
    expect(await unlabelled(page)).toEqual([]);

    await page.getByRole('link', { name: 'Treasury' }).click();
    await page.getByRole('heading', { level: 1, name: 'Treasury' }).waitFor();
    const ethereum = page.getByTestId('treasury-ethereum');
    await ethereum.getByText(treasuryAddress).waitFor();
    // A network no processor ever ran for is not said to be running.
    await page.getByTestId('treasury-bitcoin').getByText('Not running: no processor has recorded a treasury address').waitFor();
    expect(await page.getByTestId('treasury-bitcoin').getByRole('button', { name: 'Pause bitcoin' }).count()).toBe(0);
    // No node in this system: the page says why the balance is unknown.
    expect(await ethereum.getByText('CHAIN_ETHEREUM_RPC_URL is not set').count()).toBe(3);
    await ethereum.getByText('12.5 in 1 deposit').waitFor();
    const queued = ethereum.locator(`[data-payout-id="${onTreasury}"]`);
    await queued.waitFor();
    expect(await ethereum.locator(`[data-payout-id="${inQueue}"]`).count()).toBe(0);
    expect(await unlabelled(page)).toEqual([]);
    await queued.getByRole('button', { name: 'Approve 40 USDT' }).click();
    await queued.waitFor({ state: 'detached' });
    expect((await api.get(`/api/payout/${onTreasury}`, { headers: apiKeyHeader(live.key) })).body.approvedAt).toEqual(expect.any(String));

    await ethereum.getByRole('button', { name: 'Pause ethereum' }).click();
    await ethereum.getByText(`Paused by ${operator.merchantId}`).waitFor();
    expect(await db`select paused from payout.treasury_networks where network = 'ethereum'`).toEqual([{ paused: true }]);
    await ethereum.getByRole('button', { name: 'Resume ethereum' }).click();
    await ethereum.getByText('Running.').waitFor();
    expect(await db`select paused from payout.treasury_networks where network = 'ethereum'`).toEqual([{ paused: false }]);
    expect(tab.problems).toEqual([]);
  } finally {
    await tab.context.close();
  }

  // The merchant: an auto-sweep destination, confirmed with the emailed code.
  const merchantTab = await openTab();
  try {
    const { page } = merchantTab;
    await signIn(page, merchant.email, merchant.password);
    // Client-side, from the projects list (a new page load would abort the list's request).
    await page.getByRole('link', { name: 'Treasury shop' }).click();
    await page.getByRole('heading', { name: 'Auto-sweep' }).waitFor();
    await page.getByText('No auto-sweep is set.').waitFor();
    const destination = addressFor('USDT', 'mainnet');
    await page.getByLabel('Auto-sweep currency').selectOption('USDT');
    await page.getByLabel('Destination address').fill(destination);
    await page.getByLabel('Threshold').fill('1000');
    await page.getByRole('button', { name: 'Save auto-sweep' }).click();
    await page.getByLabel('Auto-sweep verification code').fill(await autoSweepCode(destination));
    expect(await unlabelled(page)).toEqual([]);
    await page.getByRole('button', { name: 'Confirm auto-sweep' }).click();
    const rule = page.getByTestId('auto-sweep-rule');
    await rule.getByText(destination).waitFor();
    expect(await rule.textContent()).toContain('1000');
    expect(await rule.textContent()).toContain('ethereum');
    expect(await page.getByLabel('Auto-sweep verification code').count()).toBe(0);
    const stored = await api.get(`/api/merchant/projects/${live.id}/auto-sweep`, { headers: { authorization: `Bearer ${merchant.token}` } });
    expect(stored.body).toMatchObject({ entries: [{ currency: 'USDT', network: 'ethereum', address: destination, threshold: '1000' }], pendingChange: null });

    await page.getByRole('button', { name: 'Remove the USDT auto-sweep on ethereum' }).click();
    await page.getByText('No auto-sweep is set.').waitFor();
    expect(merchantTab.problems).toEqual([]);
  } finally {
    await merchantTab.context.close();
  }
}, 240_000);
