/**
 * Money counts only when it is final (docs/accounting.md), end to end on a REAL node (anvil): the
 * ledger is credited with accounted payments only — confirmed to the invoice's
 * confirmationsRequired, not orphaned — the moment they become accounted, never before. And an
 * amount with all 18 of ETH's decimals never breaks a read: every surface carries its exact
 * decimal string. Balances and amounts are compared as exact decimal strings, never as floats.
 * Last, the ledger invariant check finds deliberately corrupted ledger rows.
 */
import { formatEther, parseEther, type Hash } from 'viem';
import { Webhook } from 'standardwebhooks';
import { markEmailVerified } from '../support/accounts';
import postgres from 'postgres';
import { grantOperator } from '../support/operators';
import { Decimal } from '@coinvoice/domain/money';
import { bearer, createProjectWithKey, GatewayClient, registerMerchant, type ProjectFixture } from '../support/http';
import { mine, mined, sendEth, startAnvil, type Anvil } from '../support/anvil';
import { launchBrowser } from '../support/browser';
import { bootSystem, type BootedSystem } from '../support/system';
import { LiveShop, type LiveInvoice } from './live-ethereum.support';
import { deleteStreams, eventually, Receiver } from './webhooks.support';

const CONFIRMATIONS = 3;

let anvil: Anvil;
let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;
let live: ProjectFixture;
let shop: LiveShop;
let merchantToken: string;

beforeAll(async () => {
  anvil = await startAnvil();
  receiver = await new Receiver().start();
  system = await bootSystem({
    env: {
      CHAIN_ETHEREUM_RPC_URL: anvil.url,
      CHAIN_ETHEREUM_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_ETHEREUM_POLL_MS: '100',
      INVOICE_SWEEP_INTERVAL_MS: '200',
      WEBHOOK_RETRY_SCHEDULE: '200ms,300ms,300ms',
      PASSWORD_HASH_MEMORY_KIB: '1024',
      // The invariant check (last test) treats a reported credit without a ledger entry as missing at once.
      LEDGER_CHECK_GRACE_MS: '0',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
  const merchant = await registerMerchant(api);
  await markEmailVerified(system, merchant.merchantId);
  merchantToken = merchant.token;
  live = await createProjectWithKey(api, merchant, 'live', { webhookUrl: receiver.url });
  shop = new LiveShop(api, live);
}, 120_000);

afterAll(async () => {
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver?.stop();
  await anvil?.stop();
});

/** The live ETH balance, exactly, as a decimal string. */
const ethBalance = async () => (await shop.balance('ETH')).toFixed();
const createEthInvoice = (priceAmount: string) => shop.createInvoice('ETH', priceAmount);
const invoiceReaches = (id: string, check: (invoice: LiveInvoice) => boolean, what: string) => shop.invoiceReaches(id, check, what);

/** Exact decimal sum of ETH amounts, through wei. */
function plus(...amounts: string[]): string {
  const wei = amounts.reduce((total, a) => total + parseEther(a), 0n);
  return formatEther(wei);
}

const balanceIs = (expected: string) => shop.balanceReaches('ETH', new Decimal(expected));

/** Signed webhooks for an invoice (standardwebhooks verifies each), parsed. */
function webhooksOf(invoiceId: string): Array<Record<string, unknown>> {
  const wh = new Webhook(live.webhookSecret);
  return receiver.requests
    .filter((r) => r.body.includes(invoiceId))
    .map((r) => wh.verify(r.body, {
      'webhook-id': String(r.headers['webhook-id']),
      'webhook-timestamp': String(r.headers['webhook-timestamp']),
      'webhook-signature': String(r.headers['webhook-signature']),
    }) as Record<string, unknown>);
}

/** What the webhook body's `amount` token says, exactly (the raw JSON text, not a double). */
function rawAmounts(invoiceId: string, status: string): string[] {
  return receiver.requests
    .filter((r) => r.body.includes(invoiceId) && r.body.includes(`"status":"${status}"`))
    .map((r) => /"amount":(-?\d+(?:\.\d+)?)/.exec(r.body)?.[1] ?? '');
}

/** Lets the watcher run a few more poll rounds. */
const settle = (ms = 1_500) => new Promise((r) => setTimeout(r, ms));

let credited = '0';

/**
 * Pays `invoice` in full (block N), mines one block, takes a snapshot, then sends `extra` ETH
 * (block N+2): at that head the first payment has 3 of 3 confirmations, the second 1 of 3.
 */
async function paidWhileAnotherPaymentIsUnconfirmed(invoice: LiveInvoice, extra: string): Promise<{ snapshot: `0x${string}`; extraHash: Hash }> {
  await sendEth(anvil, invoice.address, invoice.amountExpectedDecimal);
  await mine(anvil, 1);
  const snapshot = await anvil.testClient.snapshot();
  const extraHash = await sendEth(anvil, invoice.address, extra);
  const paid = await invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'Paid');
  expect(paid.payments!.map((p) => [p.status, p.confirmations, p.amountDecimal])).toEqual([
    ['confirmed', CONFIRMATIONS, invoice.amountExpectedDecimal],
    ['seen', 1, extra],
  ]);
  return { snapshot, extraHash };
}

test('Paid while another payment has 1 of 3 confirmations: only the confirmed money is credited; the other block is orphaned and nothing is ever credited for it', async () => {
  const invoice = await createEthInvoice('20.00');
  const { snapshot } = await paidWhileAnotherPaymentIsUnconfirmed(invoice, '0.5');

  // invoice.paid and the ledger carry the accounted money only: amountExpected, not + 0.5.
  await eventually(async () => (webhooksOf(invoice.id).some((b) => b.status === 'Paid') ? true : undefined), 15_000, 'invoice.paid');
  expect(rawAmounts(invoice.id, 'Paid')).toEqual([invoice.amountExpectedDecimal]);
  credited = plus(credited, invoice.amountExpectedDecimal);
  await balanceIs(credited);

  // The unconfirmed payment's block leaves the chain (the other branch is longer).
  await anvil.testClient.revert({ id: snapshot });
  await mine(anvil, 2 + CONFIRMATIONS);
  const after = await invoiceReaches(invoice.id, (i) => i.payments?.[1]?.status === 'orphaned', 'second payment orphaned');
  expect(after.status).toBe('Paid');
  // The orphaned money was never credited: it is not received either.
  expect(after.amountReceivedDecimal).toBe(invoice.amountExpectedDecimal);
  await settle();
  expect(await ethBalance()).toBe(credited);
  expect(webhooksOf(invoice.id).filter((b) => b.status === 'Paid' && 'credited' in b)).toEqual([]);
  // No incident either: the money that left had never been credited.
  const watcher = Object.entries(system.current()).find(([name]) => name.startsWith('watch-ethereum'))?.[1];
  const metrics = await fetch(`${watcher!.adminUrl}/metrics`).then((r) => r.text());
  expect(metrics).toMatch(/^watcher_payments_orphaned_total\{chain="ethereum"\} [1-9]/m);
  expect(metrics).not.toMatch(/^watcher_credited_payments_orphaned_total\{chain="ethereum"\} [1-9]/m);
});

test('Paid while another payment has 1 of 3 confirmations: when it confirms it is credited once, as a late payment', async () => {
  const invoice = await createEthInvoice('25.00');
  await paidWhileAnotherPaymentIsUnconfirmed(invoice, '0.25');
  credited = plus(credited, invoice.amountExpectedDecimal);
  await balanceIs(credited);

  await mine(anvil, CONFIRMATIONS - 1);
  await invoiceReaches(invoice.id, (i) => i.payments?.[1]?.status === 'confirmed', 'second payment confirmed');
  credited = plus(credited, '0.25');
  await balanceIs(credited);
  await eventually(async () => (webhooksOf(invoice.id).some((b) => b.credited === true) ? true : undefined), 15_000, 'invoice.late_payment');
  const late = webhooksOf(invoice.id).filter((b) => 'credited' in b);
  expect(late).toEqual([expect.objectContaining({ credited: true, currency: 'ETH', status: 'Paid' })]);
  expect(rawAmounts(invoice.id, 'Paid').sort()).toEqual([invoice.amountExpectedDecimal, '0.25'].sort());

  // More blocks change nothing: credited once.
  await mine(anvil, 6);
  await settle();
  expect(await ethBalance()).toBe(credited);
  expect(webhooksOf(invoice.id).filter((b) => 'credited' in b)).toHaveLength(1);
});

test('a payment of amountExpected + 1 wei: every read works and carries the exact amount as a decimal string', async () => {
  const invoice = await createEthInvoice('30.00');
  const oneWeiMore = formatEther(parseEther(invoice.amountExpectedDecimal) + 1n);
  expect(oneWeiMore).toMatch(/^\d+\.\d{18}$/);
  await sendEth(anvil, invoice.address, oneWeiMore);
  await mine(anvil, CONFIRMATIONS - 1);
  const paid = await invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'Paid');
  expect(paid.amountReceivedDecimal).toBe(oneWeiMore);
  expect(paid.payments?.[0]?.amountDecimal).toBe(oneWeiMore);
  expect(paid.amountReceived).toBe(Number(oneWeiMore));

  // The merchant's list and invoice page, the public checkout JSON.
  const list = await api.get(`/api/merchant/projects/${live.id}/invoices`, { headers: { authorization: `Bearer ${merchantToken}` } });
  expect(list.status).toBe(200);
  expect((list.body.items as LiveInvoice[]).find((i) => i.id === invoice.id)?.amountReceivedDecimal).toBe(oneWeiMore);
  const page = await api.get(`/api/merchant/invoices/${invoice.id}`, { headers: { authorization: `Bearer ${merchantToken}` } });
  expect(page.status).toBe(200);
  expect(page.body.amountReceivedDecimal).toBe(oneWeiMore);
  const checkout = await api.get(`/api/checkout/${invoice.id}`);
  expect(checkout.status).toBe(200);
  expect(checkout.body).toMatchObject({ amountReceivedDecimal: oneWeiMore, amountRemainingDecimal: '0', status: 'Paid' });

  // invoice.paid's body writes the amount token digit for digit; the ledger holds it exactly.
  await eventually(async () => (rawAmounts(invoice.id, 'Paid').length > 0 ? true : undefined), 15_000, 'invoice.paid');
  expect(rawAmounts(invoice.id, 'Paid')).toEqual([oneWeiMore]);
  credited = plus(credited, oneWeiMore);
  await balanceIs(credited);

  // The hosted page renders it: plain decimals, never exponent notation.
  const browser = await launchBrowser();
  try {
    const tab = await browser.newPage();
    await tab.goto(`${system.gatewayUrl}/pay/${invoice.id}`);
    await tab.waitForSelector('#paid:not(.hidden)', { timeout: 20_000 });
    expect(await tab.textContent('#received')).toBe(`${oneWeiMore} ETH`);
  } finally {
    await browser.close();
  }
});

test('the checkout page shows a tiny remainder as a plain decimal (0.00000001 ETH, never 1e-8)', async () => {
  const invoice = await createEthInvoice('40.00');
  const short = formatEther(parseEther(invoice.amountExpectedDecimal) - parseEther('0.00000001'));
  const browser = await launchBrowser();
  try {
    const tab = await browser.newPage();
    await tab.goto(`${system.gatewayUrl}/pay/${invoice.id}`);
    await tab.waitForSelector('#pay:not(.hidden)');
    await mined(anvil, await anvil.wallet.sendTransaction({ to: invoice.address as `0x${string}`, value: parseEther(short) }));
    await tab.waitForFunction(() => document.getElementById('status')?.textContent?.includes('remaining'), undefined, { timeout: 20_000 });
    expect(await tab.textContent('#amount')).toBe('0.00000001 ETH');
    expect(await tab.textContent('body')).not.toMatch(/\de-\d/);
  } finally {
    await browser.close();
  }
  const checkout = await api.get(`/api/checkout/${invoice.id}`);
  expect(checkout.body).toMatchObject({ status: 'PartiallyPaid', amountRemainingDecimal: '0.00000001', amountReceivedDecimal: short });
});

test('credit-missing credits a reported credit the ledger never got (its event lost), exactly and once; the check then holds (docs/accounting.md#crediting-what-is-missing)', async () => {
  const operator = await grantOperator(system, api, `ops-repair-${Date.now()}@example.com`, 'correct horse battery staple');
  const db = postgres(system.database.url, { max: 1, onnotice: () => undefined });
  try {
    // The state an invoice.paid lost with a JetStream store leaves: no entry, the balance without it.
    const [lost] = await db<{ invoice_id: string; amount: string }[]>`
      select invoice_id::text, amount::text from payout.ledger_entries
      where kind = 'credit_invoice' and environment = 'live' and project_id = ${live.id} order by id limit 1`;
    await db.begin(async (tx) => {
      await tx`delete from payout.ledger_entries where kind = 'credit_invoice' and invoice_id = ${lost!.invoice_id}`;
      await tx`update payout.balances set available = available - ${lost!.amount}::numeric where project_id = ${live.id} and environment = 'live' and currency = 'ETH' and network = 'ethereum'`;
    });
    const missingCheck = await api.post('/api/admin/ledger/check', {}, { headers: bearer(operator.token) });
    expect((missingCheck.body as { violations: Array<{ kind: string }> }).violations.map((v) => v.kind)).toEqual(['credit_missing']);
    expect(await ethBalance()).toBe(new Decimal(credited).minus(lost!.amount).toFixed());

    expect((await api.post('/api/admin/ledger/credit-missing', {}, { headers: bearer(merchantToken) })).status).toBe(403);
    const repaired = await api.post('/api/admin/ledger/credit-missing', {}, { headers: bearer(operator.token) });
    expect(repaired.status).toBe(200);
    expect(repaired.body).toEqual({
      credited: [{ invoiceId: lost!.invoice_id, projectId: live.id, paymentId: null, currency: 'ETH', network: 'ethereum', amount: new Decimal(lost!.amount).toFixed() }],
      skipped: [],
    });
    // To the wei, and once: a second call credits nothing.
    await balanceIs(credited);
    expect((await api.post('/api/admin/ledger/credit-missing', {}, { headers: bearer(operator.token) })).body).toEqual({ credited: [], skipped: [] });
    const [entry] = await db<{ event_id: string }[]>`select event_id from payout.ledger_entries where kind = 'credit_invoice' and invoice_id = ${lost!.invoice_id}`;
    expect(entry!.event_id).toMatch(/^ledger-repair:/);
    const clean = await api.post('/api/admin/ledger/check', {}, { headers: bearer(operator.token) });
    expect((clean.body as { violations: unknown[] }).violations).toEqual([]);
  } finally {
    await db.end();
  }
});

test('the ledger invariant check holds on the real ledger, then finds each deliberately corrupted row and counts it', async () => {
  const operator = await grantOperator(system, api, `ops-${Date.now()}@example.com`, 'correct horse battery staple');
  const check = async () => {
    const res = await api.post('/api/admin/ledger/check', {}, { headers: bearer(operator.token) });
    expect(res.status).toBe(200);
    return res.body as { violations: Array<{ kind: string; detail: string }>; balancesChecked: number; creditsChecked: number };
  };
  // Everything the tests above credited is consistent: balances, invoice.paid and late credits.
  const clean = await check();
  expect(clean.violations).toEqual([]);
  expect(clean.creditsChecked).toBeGreaterThanOrEqual(4);
  expect(clean.balancesChecked).toBeGreaterThanOrEqual(1);
  const merchantCheck = await api.post('/api/admin/ledger/check', {}, { headers: bearer(merchantToken) });
  expect(merchantCheck.status).toBe(403);

  const db = postgres(system.database.url, { max: 1, onnotice: () => undefined });
  try {
    // 1 wei more in a balance than its entries say; a credit no invoice reported (a forged
    // late payment); a reported invoice.paid whose ledger entry is gone.
    await db`update payout.balances set available = available + 0.000000000000000001 where project_id = ${live.id} and currency = 'ETH'`;
    await db`insert into payout.ledger_entries (project_id, environment, currency, network, kind, amount, invoice_id, event_id, payment_id)
             values (${live.id}, 'live', 'ETH', 'ethereum', 'credit_late_payment', 1000, gen_random_uuid(), 'forged-event', 'ethereum:0xforged:0')`;
    const [gone] = await db<{ invoice_id: string }[]>`
      delete from payout.ledger_entries where id = (select min(id) from payout.ledger_entries where kind = 'credit_invoice' and environment = 'live')
      returning invoice_id`;
    const found = await check();
    const kinds = found.violations.map((v) => v.kind);
    expect(kinds).toEqual(expect.arrayContaining(['balance_mismatch', 'credit_unbacked', 'credit_missing']));
    expect(found.violations.find((v) => v.kind === 'credit_unbacked')?.detail).toContain('ethereum:0xforged:0');
    expect(found.violations.find((v) => v.kind === 'credit_missing')?.detail).toContain(gone!.invoice_id);
  } finally {
    await db.end();
  }
  const metrics = await fetch(`${system.processes.payout.adminUrl!}/metrics`).then((r) => r.text());
  expect(metrics).toMatch(/^ledger_invariant_violations_total\{kind="balance_mismatch"\} [1-9]/m);
  expect(metrics).toMatch(/^ledger_invariant_violations_total\{kind="credit_unbacked"\} [1-9]/m);
  expect(metrics).toMatch(/^ledger_invariant_violations_total\{kind="credit_missing"\} [1-9]/m);
});
