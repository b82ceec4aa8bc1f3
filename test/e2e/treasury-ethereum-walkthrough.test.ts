/**
 * The README's treasury walkthrough on a real node (anvil), every process real and started the way
 * `npm start` starts them (docs/treasury.md): a customer pays a live invoice; the deposit is swept
 * to the treasury; a payout under PAYOUT_AUTO_MAX_ETH is sent by the processor by itself, one above
 * it only after an operator's Approve; each ends with `payout.completed` carrying a hash that
 * eth_getTransactionReceipt confirms, and the fresh destination holds exactly the amount, to the
 * wei. Last, no secret leaks: the mnemonic and every derived private key appear in no table, no
 * log line and no NATS message.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { HDKey } from '@scure/bip32';
import { generateMnemonic, mnemonicToSeedSync } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import { bytesToHex, formatEther, parseEther, type Address, type Hash } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { Webhook } from 'standardwebhooks';
import { codeInMail, mailText } from '../../deploy/local/src/mailbox';
import { markEmailVerified } from '../support/accounts';
import { testNatsUrl } from '../support/infra';
import { grantOperator } from '../support/operators';
import { apiKeyHeader, bearer, createProjectWithKey, GatewayClient, registerMerchant, type MerchantFixture, type ProjectFixture } from '../support/http';
import { compileTestContracts, deployTokens, mine, sendEth, sendToken, startAnvil, tokenUnits, type Anvil, type Tokens } from '../support/anvil';
import { bootSystem, type BootedSystem } from '../support/system';
import { LiveShop } from './live-ethereum.support';
import { requestVerifiedPayout as requestVerified } from './treasury-walkthrough.support';
import { deleteStreams, eventually, Receiver } from './webhooks.support';

const CONFIRMATIONS = 2;
const AUTO_MAX_ETH = '0.01';

let anvil: Anvil;
let tokens: Tokens;
let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;
let merchant: MerchantFixture;
let operator: MerchantFixture;
let live: ProjectFixture;
let shop: LiveShop;
let nats: NatsConnection;
const natsMessages: string[] = [];
const mnemonic = generateMnemonic(wordlist, 128);
const account = HDKey.fromMasterSeed(mnemonicToSeedSync(mnemonic)).derive("m/44'/60'/0'");

/** Every private key the walkthrough could have touched: the treasury's and the first deposit keys'. */
function derivedPrivateKeys(): string[] {
  const keys = [account.deriveChild(1).deriveChild(0).privateKey!];
  for (let i = 0; i < 20; i++) keys.push(account.deriveChild(0).deriveChild(i).privateKey!);
  return [account.privateKey!, ...keys].map((k) => bytesToHex(k).slice(2));
}

beforeAll(async () => {
  anvil = await startAnvil();
  tokens = await deployTokens(anvil);
  receiver = await new Receiver().start();
  const secrets = mkdtempSync(path.join(tmpdir(), 'coinvoice-signer-'));
  const seedFile = path.join(secrets, 'mnemonic');
  writeFileSync(seedFile, `${mnemonic}\n`, { mode: 0o600 });
  const xpub = account.publicExtendedKey;
  system = await bootSystem({
    env: {
      CHAIN_ETHEREUM_RPC_URL: anvil.url,
      CHAIN_ETHEREUM_CHAIN_ID: '31337',
      CHAIN_ETHEREUM_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_ETHEREUM_POLL_MS: '100',
      CHAIN_ETHEREUM_USDT_CONTRACT: tokens.usdt,
      CHAIN_ETHEREUM_USDC_CONTRACT: tokens.usdc,
      INVOICE_XPUB_ETH: xpub,
      INVOICE_XPUB_USDT: xpub,
      INVOICE_XPUB_USDC: xpub,
      SIGNER_SEED_FILE: seedFile,
      SIGNER_MAX_PAYOUT_ETH: '1',
      SIGNER_DAILY_LIMIT_ETH: '2',
      PAYOUT_AUTO_MAX_ETH: AUTO_MAX_ETH,
      PAYOUT_PROCESSOR_POLL_MS: '200',
      WEBHOOK_RETRY_SCHEDULE: '200ms,300ms,300ms',
      PASSWORD_HASH_MEMORY_KIB: '1024',
    },
  });
  nats = await connect({ servers: testNatsUrl() });
  nats.subscribe(`${system.namespace}.>`, { callback: (_err, msg) => natsMessages.push(`${msg.subject} ${new TextDecoder().decode(msg.data)}`) });
  api = new GatewayClient(system.gatewayUrl);
  merchant = await registerMerchant(api);
  await markEmailVerified(system, merchant.merchantId);
  operator = await grantOperator(system, api, `ops-${Date.now()}@coinvoice.test`, 'operator-password-1');
  live = await createProjectWithKey(api, merchant, 'live', { webhookUrl: receiver.url });
  shop = new LiveShop(api, live);
}, 180_000);

afterAll(async () => {
  if (process.env.KEEP_LOGS) execFileSync('cp', ['-r', path.join(system.dataDir, 'logs'), process.env.KEEP_LOGS]);
  await nats?.close();
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver?.stop();
  await anvil?.stop();
});

/** The processes npm start names in .data/system.json. */
function processNames(): string[] {
  return Object.keys(system.current());
}

/** A payout requested, verified with the emailed code, and answered as the API answers it. */
function requestVerifiedPayout(amount: string, address: Address): Promise<string> {
  return requestVerified({ api, system, project: live }, { amount: Number(amount), currency: 'ETH', address });
}

async function payout(id: string): Promise<Record<string, any>> {
  const res = await api.get(`/api/payout/${id}`, { headers: apiKeyHeader(live.key) });
  expect(res.status).toBe(200);
  return res.body;
}

/** The signed payout.completed webhook of a payout of the live project (standardwebhooks verifies it). */
function completedWebhook(payoutId: string): Promise<Record<string, any>> {
  return completedWebhookOf(live, payoutId);
}

async function completedWebhookOf(project: ProjectFixture, payoutId: string): Promise<Record<string, any>> {
  const wh = new Webhook(project.webhookSecret);
  let minedAt = 0;
  return eventually(async () => {
    const request = receiver.requests.find((r) => r.body.includes(payoutId) && r.body.includes('"Completed"'));
    if (!request) {
      // Blocks come when asked (anvil mines one per transaction): the confirmations need more.
      if (Date.now() - minedAt > 300) {
        minedAt = Date.now();
        await mine(anvil, 1);
      }
      return undefined;
    }
    return wh.verify(request.body, {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    }) as Record<string, any>;
  }, 60_000, `payout.completed of ${payoutId}`);
}

/** The transaction the hash names, confirmed by the node: a successful transfer of exactly `amount` to `to`. */
async function expectOnChainTransfer(hash: string, to: Address, amount: string): Promise<void> {
  const receipt = await anvil.publicClient.getTransactionReceipt({ hash: hash as Hash });
  expect(receipt.status).toBe('success');
  const transaction = await anvil.publicClient.getTransaction({ hash: hash as Hash });
  expect(transaction.to?.toLowerCase()).toBe(to.toLowerCase());
  expect(transaction.value).toBe(parseEther(amount));
}

test('npm start runs the signer and the Ethereum processor as named processes', () => {
  expect(processNames()).toEqual(expect.arrayContaining(['payout-sign', 'payout-process-ethereum']));
});

test('a paid live invoice is swept to the treasury; payouts go out on chain — under the auto limit by themselves, above it after Approve', async () => {
  // 1. A customer pays a live invoice; it confirms and the balance is credited.
  const invoice = await shop.createInvoice('ETH', '300.00');
  await sendEth(anvil, invoice.address, invoice.amountExpectedDecimal);
  await mine(anvil, CONFIRMATIONS);
  await shop.invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'is Paid', 30_000);
  const paid = parseEther(invoice.amountExpectedDecimal);

  // 2. The deposit is swept: the deposit address keeps at most the fee reserve it could not spend,
  //    the treasury holds the rest (the Treasury view names the treasury address).
  const treasury = await eventually(async () => {
    const res = await api.get('/api/admin/treasury', { headers: bearer(operator.token) });
    const network = (res.body?.networks as Array<Record<string, any>> | undefined)?.find((n) => n.network === 'ethereum');
    return network?.address as Address | undefined;
  }, 30_000, 'the treasury address');
  await eventually(async () => {
    await mine(anvil, 1);
    const tasks = await api.get(`/api/admin/sweep-tasks?invoiceId=${invoice.id}`, { headers: bearer(operator.token) });
    return (tasks.body?.items as Array<{ status: string }> | undefined)?.every((t) => t.status === 'confirmed') && tasks.body.items.length === 1 ? true : undefined;
  }, 60_000, 'the sweep confirmed');
  const left = await anvil.publicClient.getBalance({ address: invoice.address as Address });
  const treasuryHolds = await anvil.publicClient.getBalance({ address: treasury });
  expect(treasuryHolds).toBeGreaterThan(0n);
  expect(treasuryHolds + left).toBeLessThan(paid); // the sweep's gas was paid from the deposit
  expect(paid - treasuryHolds - left).toBeLessThan(parseEther('0.001'));

  // 3. A payout under the auto limit: sent without anyone's action.
  const small = privateKeyToAccount(generatePrivateKey()).address;
  const smallId = await requestVerifiedPayout('0.005', small);
  const smallDone = await completedWebhook(smallId);
  await expectOnChainTransfer(smallDone.transactionHash, small, '0.005');
  expect(await anvil.publicClient.getBalance({ address: small })).toBe(parseEther('0.005'));
  expect(await payout(smallId)).toMatchObject({ status: 'Completed', transactionHash: smallDone.transactionHash, origin: 'merchant' });

  // 4. Above the limit: it waits for an operator; Approve sends it.
  const large = privateKeyToAccount(generatePrivateKey()).address;
  const largeId = await requestVerifiedPayout('0.02', large);
  await mine(anvil, 3);
  await new Promise((r) => setTimeout(r, 1_500)); // several processor rounds
  expect(await payout(largeId)).toMatchObject({ status: 'Pending', transactionHash: null, processing: false });
  expect(await anvil.publicClient.getBalance({ address: large })).toBe(0n);
  const approved = await api.post(`/api/admin/payouts/${largeId}/approve`, {}, { headers: bearer(operator.token) });
  expect(approved.status).toBe(200);
  const approvedAt = Date.now();
  await eventually(async () => {
    await mine(anvil, 1);
    return (await payout(largeId)).status === 'Completed' ? true : undefined;
  }, 60_000, 'the approved payout completed');
  const largeDone = await completedWebhook(largeId);
  await expectOnChainTransfer(largeDone.transactionHash, large, '0.02');
  expect(await anvil.publicClient.getBalance({ address: large })).toBe(parseEther('0.02'));
  console.log(`approve → Completed: ${Date.now() - approvedAt} ms (anvil mined on demand, ${CONFIRMATIONS} confirmations)`);

  // The ledger: what was paid, less both payouts, to the wei.
  expect((await shop.balance('ETH')).toFixed()).toBe(formatEther(paid - parseEther('0.025')));
}, 240_000);

test('a USDT deposit is swept after a gas top-up from the treasury, and the top-up is no payment: no ETH on the invoice, no late payment, no ETH sweep task', async () => {
  const invoice = await shop.createInvoice('USDT', '25.00');
  await sendToken(anvil, tokens.usdt, invoice.address, invoice.amountExpectedDecimal);
  await mine(anvil, CONFIRMATIONS);
  await shop.invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'is Paid', 30_000);
  const tasks = await eventually(async () => {
    await mine(anvil, 1);
    const res = await api.get(`/api/admin/sweep-tasks?invoiceId=${invoice.id}`, { headers: bearer(operator.token) });
    const items = res.body?.items as Array<{ status: string; asset: string }> | undefined;
    return items && items.length > 0 && items.every((t) => t.status === 'confirmed') ? items : undefined;
  }, 60_000, 'the token sweep confirmed');
  // One task, the token's: the top-up the sweep needed made none.
  expect(tasks.map((t) => t.asset)).toEqual(['USDT']);
  const { TestToken } = compileTestContracts();
  const tokenBalance = (address: string) => anvil.publicClient.readContract({ address: tokens.usdt, abi: TestToken.abi, functionName: 'balanceOf', args: [address as Address] }) as Promise<bigint>;
  expect(await tokenBalance(invoice.address)).toBe(0n);
  const treasury = ((await api.get('/api/admin/treasury', { headers: bearer(operator.token) })).body.networks as Array<Record<string, any>>).find((n) => n.network === 'ethereum')!.address as string;
  expect(await tokenBalance(treasury)).toBe(tokenUnits(invoice.amountExpectedDecimal));
  // The address sent the sweep, so it had received ETH for its gas (the top-up) …
  expect(await anvil.publicClient.getTransactionCount({ address: invoice.address as Address })).toBe(1);
  // … and the watcher, which still watches the Paid invoice's address, took it for no payment.
  await mine(anvil, CONFIRMATIONS + 1);
  await new Promise((r) => setTimeout(r, 1_000));
  expect((await shop.getInvoice(invoice.id)).payments?.map((p) => p.asset)).toEqual(['USDT']);
  expect(receiver.requests.filter((r) => r.body.includes(invoice.id) && String(r.headers['webhook-event-type']) === 'invoice.late_payment')).toEqual([]);
}, 120_000);

test("auto-sweep: a live project's balance reaching its threshold arrives at its own address on chain, exactly once", async () => {
  const project = await createProjectWithKey(api, merchant, 'live', { webhookUrl: receiver.url });
  const projectShop = new LiveShop(api, project);
  const destination = privateKeyToAccount(generatePrivateKey()).address;
  const path = `/api/merchant/projects/${project.id}/auto-sweep`;
  const put = await api.put(path, { entries: [{ currency: 'ETH', address: destination, threshold: '0.008' }] }, { headers: bearer(merchant.token) });
  expect(put.status).toBe(202);
  const code = await eventually(async () => {
    const mail = system.mail.messages().find((raw) => mailText(raw).includes(destination));
    return mail ? codeInMail(mailText(mail)) : undefined;
  }, 20_000, 'the auto-sweep code email');
  expect((await api.post(`${path}/verify`, { code }, { headers: bearer(merchant.token) })).status).toBe(200);

  // 20.00 USD at the static rate is 0.008 ETH: the credit reaches the threshold, and 0.008 is
  // under PAYOUT_AUTO_MAX_ETH, so the processor sends it without an Approve.
  const invoice = await projectShop.createInvoice('ETH', '20.00');
  expect(invoice.amountExpectedDecimal).toBe('0.008');
  await sendEth(anvil, invoice.address, invoice.amountExpectedDecimal);
  await mine(anvil, CONFIRMATIONS);
  await projectShop.invoiceReaches(invoice.id, (i) => i.status === 'Paid', 'is Paid', 30_000);
  const sweep = await eventually(async () => {
    const res = await api.get('/api/payout/history', { headers: apiKeyHeader(project.key) });
    return (res.body.items as Array<Record<string, any>>).find((p) => p.origin === 'auto_sweep');
  }, 20_000, 'the auto-sweep payout');
  const done = await completedWebhookOf(project, sweep.id);
  await expectOnChainTransfer(done.transactionHash, destination, '0.008');
  expect(await anvil.publicClient.getBalance({ address: destination })).toBe(parseEther('0.008'));

  // Exactly once: one auto-sweep payout, nothing left to sweep, nothing more sent.
  await mine(anvil, 3);
  await new Promise((r) => setTimeout(r, 1_000));
  const history = await api.get('/api/payout/history', { headers: apiKeyHeader(project.key) });
  expect((history.body.items as Array<Record<string, any>>).map((p) => [p.origin, p.status])).toEqual([['auto_sweep', 'Completed']]);
  expect((await projectShop.balance('ETH')).toFixed()).toBe('0');
  expect(await anvil.publicClient.getBalance({ address: destination })).toBe(parseEther('0.008'));
}, 120_000);

test('the mnemonic and the derived private keys are in no table, no log line and no NATS message', () => {
  const secrets = [mnemonic, ...derivedPrivateKeys()];
  const dump = execFileSync('pg_dump', ['--data-only', system.database.url], { maxBuffer: 256 * 1024 * 1024, stdio: ['ignore', 'pipe', 'ignore'] }).toString('utf8').toLowerCase();
  const logDir = path.join(system.dataDir, 'logs');
  const logs = readdirSync(logDir).map((f) => readFileSync(path.join(logDir, f), 'utf8')).join('\n').toLowerCase();
  const messages = natsMessages.join('\n').toLowerCase();
  expect(dump.length).toBeGreaterThan(1000);
  expect(logs).toContain('signer');
  expect(messages).toContain('payout.completed');
  for (const secret of secrets) {
    for (const [where, text] of [['database', dump], ['logs', logs], ['nats', messages]] as const) {
      expect({ where, leaked: text.includes(secret.toLowerCase()) }).toEqual({ where, leaked: false });
    }
  }
  // Not even a run of the mnemonic's words in order.
  const words = mnemonic.split(' ');
  for (let i = 0; i + 4 <= words.length; i++) {
    const run = words.slice(i, i + 4).join(' ');
    expect({ run, leaked: dump.includes(run) || logs.includes(run) || messages.includes(run) }).toEqual({ run, leaked: false });
  }
});
