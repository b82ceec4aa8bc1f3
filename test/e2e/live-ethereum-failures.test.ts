/**
 * Live payments on Ethereum when things go wrong, end to end against anvil through the gateway:
 * a node that answers `null` blocks, JSON-RPC errors, hangs, or is down for 30 s; a watcher that
 * is stopped while a payment is mined before expiry; a payment after expiry; the active watcher
 * SIGKILLed mid-backfill with a standby ready. The watchers (two replicas: one active, one
 * standby) reach anvil through a fault-injecting JSON-RPC proxy.
 */
import { Decimal } from '@coinvoice/domain/money';
import { createDb, type Sql } from '@coinvoice/runtime';
import { markEmailVerified } from '../support/accounts';
import { createProjectWithKey, GatewayClient, registerMerchant, type ProjectFixture } from '../support/http';
import { deployTokens, forwardEthTwo, mine, sendEth, startAnvil, type Anvil } from '../support/anvil';
import { RpcFaultProxy } from '../support/rpc-fault-proxy';
import { bootSystem, isAlive, type BootedSystem } from '../support/system';
import { LiveShop } from './live-ethereum.support';
import { deleteStreams, eventually, Receiver } from './webhooks.support';

const CONFIRMATIONS = 2;
/** The node outage of the bad-input test (the issue asks for 30 s). */
const OUTAGE_MS = Number(process.env.LIVE_ETH_OUTAGE_MS ?? 30_000);

let anvil: Anvil;
let proxy: RpcFaultProxy;
let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;
let live: ProjectFixture;
let db: Sql;

beforeAll(async () => {
  anvil = await startAnvil();
  proxy = await new RpcFaultProxy(anvil.url).start();
  receiver = await new Receiver().start();
  system = await bootSystem({
    env: {
      CHAIN_ETHEREUM_RPC_URL: proxy.url,
      CHAIN_ETHEREUM_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_ETHEREUM_POLL_MS: '100',
      CHAIN_ETHEREUM_RPC_TIMEOUT_MS: '1000',
      CHAIN_ETHEREUM_BATCH_BLOCKS: '10',
      WATCHER_REPLICAS: '2',
      INVOICE_SWEEP_INTERVAL_MS: '200',
      WEBHOOK_RETRY_SCHEDULE: '200ms,300ms,300ms',
      PASSWORD_HASH_MEMORY_KIB: '1024',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
  db = createDb({ url: system.database.url, schema: 'invoice', max: 2 });
  const merchant = await registerMerchant(api);
  // Live keys need a verified email (issue 12); the emailed-code flow has its own tests.
  await markEmailVerified(system, merchant.merchantId);
  live = await createProjectWithKey(api, merchant, 'live', { webhookUrl: receiver.url });
}, 120_000);

afterAll(async () => {
  await db?.end({ timeout: 5 });
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver?.stop();
  await proxy?.stop();
  await anvil?.stop();
});

const createInvoice = (priceAmount = '20.00') => new LiveShop(api, live).createInvoice('ETH', priceAmount);
const invoiceReaches = (id: string, status: string, timeoutMs = 20_000) => new LiveShop(api, live).invoiceReaches(id, (i) => i.status === status, status, timeoutMs);
const liveBalance = (currency: string) => new LiveShop(api, live).balance(currency);
const getInvoice = (id: string) => new LiveShop(api, live).getInvoice(id);

const watchers = () => Object.entries(system.current()).filter(([name]) => name.startsWith('watch-ethereum'));

async function metricsOf(adminUrl: string): Promise<string> {
  const res = await fetch(`${adminUrl}/metrics`);
  return res.text();
}

/** The watcher replica holding the chain's lock. */
async function activeWatcher(timeoutMs = 10_000): Promise<{ name: string; pid: number; adminUrl: string }> {
  return eventually(async () => {
    for (const [name, info] of watchers()) {
      const text = await metricsOf(info.adminUrl!).catch(() => '');
      if (/^watcher_active\{chain="ethereum"\} 1$/m.test(text)) return { name, pid: info.pid, adminUrl: info.adminUrl! };
    }
    return undefined;
  }, timeoutMs, 'an active ethereum watcher');
}

function sourceErrors(metrics: string): Record<string, number> {
  const errors: Record<string, number> = {};
  for (const match of metrics.matchAll(/^watcher_source_errors_total\{chain="ethereum",kind="([a-z_]+)"\} (\d+)$/gm)) errors[match[1]!] = Number(match[2]);
  return errors;
}

const paidHooks = (invoiceId: string) => receiver.requests.filter((r) => r.body.includes(invoiceId) && r.body.includes('"status":"Paid"') && !r.body.includes('transactionHash'));

let credited = new Decimal(0);

test('bad answers from the node (null blocks, RPC errors, timeouts, 30 s down) never crash the watcher and never mark anything; visible in metrics and logs', async () => {
  const paidBefore = await createInvoice('5.00');
  await sendEth(anvil, paidBefore.address, String(paidBefore.amountExpected));
  await mine(anvil, CONFIRMATIONS);
  await invoiceReaches(paidBefore.id, 'Paid');
  credited = credited.plus(paidBefore.amountExpectedDecimal);
  const active = await activeWatcher();
  const pidsBefore = watchers().map(([, info]) => info.pid);

  const invoice = await createInvoice();
  for (const fault of ['null_blocks', 'rpc_error', 'hang'] as const) {
    proxy.fault = fault;
    if (fault === 'null_blocks') await sendEth(anvil, invoice.address, String(invoice.amountExpected));
    await mine(anvil, 1);
    await new Promise((r) => setTimeout(r, 2_500));
    expect(proxy.injected[fault]).toBeGreaterThan(0);
    const during = await getInvoice(invoice.id);
    expect({ fault, status: during.status, payments: during.payments }).toEqual({ fault, status: 'Waiting', payments: [] });
  }
  await proxy.down();
  await new Promise((r) => setTimeout(r, OUTAGE_MS));
  expect((await getInvoice(invoice.id)).status).toBe('Waiting');
  // Nothing that was recorded was touched: the paid invoice's payment is still on its chain.
  expect((await getInvoice(paidBefore.id)).payments).toEqual([expect.objectContaining({ status: 'confirmed' })]);

  const errors = sourceErrors(await metricsOf(active.adminUrl));
  expect(errors).toEqual(expect.objectContaining({ malformed: expect.any(Number), rpc_error: expect.any(Number), timeout: expect.any(Number), unavailable: expect.any(Number) }));
  await proxy.up();
  await invoiceReaches(invoice.id, 'Paid');
  credited = credited.plus(invoice.amountExpectedDecimal);
  // Same processes throughout: nothing crashed, nothing was restarted.
  expect(watchers().map(([, info]) => info.pid)).toEqual(pidsBefore);
  const { readFileSync } = await import('node:fs');
  // A restart names itself with the last lines its log has about why (a start-up refusal, a crash).
  const restarted = watchers()
    .filter(([, info]) => info.restarts !== 0)
    .map(([name, info]) => ({ name, restarts: info.restarts, why: readFileSync(`${system.dataDir}/logs/${name}.log`, 'utf8').split('\n').filter((line) => /fail|error|exit/i.test(line)).slice(-5) }));
  expect(restarted).toEqual([]);
  const log = readFileSync(`${system.dataDir}/logs/${active.name}.log`, 'utf8');
  expect(log).toContain('watcher tick failed');
  expect(log).toMatch(/"kind":"(malformed|missing_block)"/);
  await eventually(async () => ((await liveBalance('ETH')).eq(credited) ? true : undefined), 20_000, 'ETH credited');
}, 120_000);

test('a payment mined before expiredAt while the watcher is stopped pays the invoice after restart (never Expired); a payment after expiry is recorded, credited and reported while the invoice stays Expired', async () => {
  const onTime = await createInvoice('6.00');
  const late = await createInvoice('7.00');
  // Short lifetimes (the API's minimum is 5 minutes): set in the database for the test. Anvil's
  // next block time is the later of now and one second after the latest block (mining several
  // blocks at once runs its clock ahead of ours), so the lifetimes count from that.
  const latest = await anvil.publicClient.getBlock();
  const nextBlockTime = Math.max(Date.now(), (Number(latest.timestamp) + 1) * 1000);
  await db`update invoices set expired_at = ${new Date(nextBlockTime + 3_000)} where id = ${onTime.id}`;
  await db`update invoices set expired_at = ${new Date(nextBlockTime + 1_000)} where id = ${late.id}`;

  const active = await activeWatcher();
  process.kill(active.pid, 'SIGSTOP'); // the active watcher stops (it keeps its lock: no takeover)
  try {
    await sendEth(anvil, onTime.address, String(onTime.amountExpected)); // mined before expiredAt
    await new Promise((r) => setTimeout(r, 4_000));
    await mine(anvil, CONFIRMATIONS); // blocks past expiredAt
    await new Promise((r) => setTimeout(r, 1_000)); // several sweeper rounds
    expect((await getInvoice(onTime.id)).status).toBe('Waiting');
  } finally {
    process.kill(active.pid, 'SIGCONT');
  }
  const paid = await invoiceReaches(onTime.id, 'Paid');
  expect(paid.payments).toHaveLength(1);
  credited = credited.plus(onTime.amountExpectedDecimal);
  expect(receiver.requests.filter((r) => r.body.includes(onTime.id) && r.body.includes('"status":"Expired"'))).toHaveLength(0);

  // The late one: expired once the chain has passed its expiredAt, then paid.
  await invoiceReaches(late.id, 'Expired');
  const hash = await sendEth(anvil, late.address, String(late.amountExpected));
  await mine(anvil, CONFIRMATIONS);
  const report = await eventually(
    async () => receiver.requests.map((r) => JSON.parse(r.body) as Record<string, unknown>).find((b) => b.invoiceId === late.id && b.transactionHash === hash),
    20_000,
    'invoice.late_payment',
  );
  expect(report).toMatchObject({ status: 'Expired', amount: late.amountExpected, currency: 'ETH', environment: 'live', credited: true });
  const after = await getInvoice(late.id);
  expect(after.status).toBe('Expired');
  expect(after.payments).toEqual([expect.objectContaining({ transactionHash: hash, status: 'confirmed' })]);
  credited = credited.plus(late.amountExpectedDecimal);
  await eventually(async () => ((await liveBalance('ETH')).eq(credited) ? true : undefined), 20_000, 'late payment credited');
  expect(paidHooks(late.id)).toHaveLength(0);
}, 60_000);

test('ETH a contract wallet sent (an internal transfer: no block scan sees it) before expiredAt while the watcher was stopped: reconciliation dates it by the block that carried it, and the invoice is Paid, never Expired (an outside review saw it expire)', async () => {
  const tokens = await deployTokens(anvil);
  const invoice = await createInvoice('6.00');
  const latest = await anvil.publicClient.getBlock();
  const nextBlockTime = Math.max(Date.now(), (Number(latest.timestamp) + 1) * 1000);
  await db`update invoices set expired_at = ${new Date(nextBlockTime + 3_000)} where id = ${invoice.id}`;
  const active = await activeWatcher();
  process.kill(active.pid, 'SIGSTOP');
  let forwarded: bigint;
  try {
    const hash = await forwardEthTwo(anvil, tokens, invoice.address, String(invoice.amountExpected), `0x${'5'.repeat(40)}`, '0.000001');
    forwarded = (await anvil.publicClient.getTransactionReceipt({ hash })).blockNumber;
    // The next blocks are past expiredAt (anvil_mine spaces blocks a second apart otherwise).
    await anvil.testClient.increaseTime({ seconds: 10 });
    await mine(anvil, CONFIRMATIONS);
  } finally {
    process.kill(active.pid, 'SIGCONT');
  }
  const paid = await invoiceReaches(invoice.id, 'Paid');
  const [payment] = await db<{ block_number: string; transaction_hash: string }[]>`select block_number::text, transaction_hash from payments where invoice_id = ${invoice.id}`;
  expect(payment).toEqual({ block_number: String(forwarded), transaction_hash: expect.stringMatching(/^reconciled:0x[0-9a-f]{64}:/) });
  expect(paid.amountReceived).toBe(invoice.amountExpected);
  expect(receiver.requests.filter((r) => r.body.includes(invoice.id) && r.body.includes('"status":"Expired"'))).toHaveLength(0);
  credited = credited.plus(invoice.amountExpectedDecimal);
  await eventually(async () => ((await liveBalance('ETH')).eq(credited) ? true : undefined), 20_000, 'credited');
}, 60_000);

test('the active watcher SIGKILLed mid-backfill: the standby takes over within 10 s; every payment recorded exactly once', async () => {
  const invoices = await Promise.all(Array.from({ length: 12 }, () => createInvoice('3.00')));
  const active = await activeWatcher();
  process.kill(active.pid, 'SIGSTOP');
  for (const invoice of invoices) {
    await sendEth(anvil, invoice.address, String(invoice.amountExpected));
    await mine(anvil, 15);
  }
  process.kill(active.pid, 'SIGCONT');
  // Kill it once it has committed part of the backfill (batches of 10 blocks), not all of it.
  await eventually(async () => (((await getInvoice(invoices[1]!.id)).payments?.length ?? 0) > 0 ? true : undefined), 20_000, 'backfill under way');
  const remaining = (await Promise.all(invoices.map((i) => getInvoice(i.id)))).filter((i) => i.status !== 'Paid');
  process.kill(active.pid, 'SIGKILL');
  const killedAt = Date.now();
  expect(remaining.length).toBeGreaterThan(0);

  const successor = await eventually(async () => {
    const now = await activeWatcher(1_000).catch(() => undefined);
    return now && now.pid !== active.pid ? now : undefined;
  }, 10_000, 'the standby taking over');
  const takeoverMs = Date.now() - killedAt;
  expect(takeoverMs).toBeLessThan(10_000);
  expect(isAlive(active.pid)).toBe(false);
  process.stdout.write(`watcher takeover after SIGKILL: ${takeoverMs} ms (standby ${successor.name})\n`);

  for (const invoice of invoices) {
    const paid = await invoiceReaches(invoice.id, 'Paid', 30_000);
    expect(paid.payments).toHaveLength(1);
    credited = credited.plus(invoice.amountExpectedDecimal);
  }
  await eventually(async () => ((await liveBalance('ETH')).eq(credited) ? true : undefined), 20_000, 'all credited once');
  await new Promise((r) => setTimeout(r, 1_000));
  for (const invoice of invoices) expect(paidHooks(invoice.id)).toHaveLength(1);
  const [most] = await db<{ count: string }[]>`select count(*) from payments group by chain, transaction_hash, output_index order by count(*) desc limit 1`;
  expect(Number(most?.count)).toBe(1);
}, 90_000);
