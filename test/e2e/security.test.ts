/**
 * Issue 12, through the gateway, against the whole system as real processes (two auth replicas,
 * a second gateway on the second auth replica, a real SMTP server in this process): each finding
 * of the security review, attacked again and refused.
 */
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { signingKeyFromPem } from '@coinvoice/domain/credentials/jwt';
import { kekFromBytes, SecretBox } from '@coinvoice/domain/secrets-at-rest';
import { createRpcClient, errorFacts } from '@coinvoice/runtime';
import { createAddressDeriver, generateDevelopmentKeyPair } from '@coinvoice/chains/addresses';
import type { CryptoCode } from '@coinvoice/chains/coin';
import type { Network } from '@coinvoice/domain/project-network';
import { PayoutService } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import postgres from 'postgres';
import { mailText, SmtpInbox, type ReceivedMail } from '../../services/notifier/test/support/smtp';
import { eventually } from '../../services/notifier/test/support/receiver';
import { authCommand, markEmailUnverified, markEmailVerified } from '../support/accounts';
import { grantOperator } from '../support/operators';
import { publishLivePayment, withNats } from '../support/events';
import { startGatewayReplica, type GatewayReplica } from '../support/gateway-replica';
import { apiKeyHeader, bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant, type MerchantFixture } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';
import { testNatsUrl } from '../support/infra';
import { TcpProxy } from '../../services/runtime/test/support/tcp-proxy';
import { smtpMailbox } from '../support/mail';
import { awayFromWindowEdge } from '../support/async';

let system: BootedSystem;
let api: GatewayClient;
let second: GatewayReplica;
let api2: GatewayClient;
let inbox: SmtpInbox;
let db: postgres.Sql;
/** An address the legacy ADMIN_EMAILS variable names: registering it must grant nothing. */
const SQUATTED_EMAIL = `ops-${randomUUID().slice(0, 8)}@coinvoice.test`;
/** This system's key-encryption key (a fresh one, as production sets its own). */
const KEK = randomBytes(32);

beforeAll(async () => {
  inbox = await new SmtpInbox().start();
  system = await bootSystem({
    mail: smtpMailbox(inbox),
    env: {
      AUTH_REPLICAS: '2',
      ADMIN_EMAILS: SQUATTED_EMAIL,
      SMTP_URL: inbox.url,
      SECRETS_KEK: KEK.toString('base64'),
      EMAIL_FROM: 'coinvoice <no-reply@coinvoice.test>',
      PASSWORD_HASH_MEMORY_KIB: '1024',
      LOG_LEVEL: 'debug',
      // The shipped limits (README), except registrations per IP: this file registers many
      // merchants from one address.
      RATE_LIMIT_LOGIN_PER_ACCOUNT: '10/15m',
      RATE_LIMIT_LOGIN_PER_IP: '50/15m',
      RATE_LIMIT_PASSWORD_CHANGE_PER_ACCOUNT: '10/15m',
      RATE_LIMIT_REGISTER_PER_IP: '25/1h',
      RATE_LIMIT_EMAIL_CODE_PER_ACCOUNT: '10/1h',
      RATE_LIMIT_PAYOUT_VERIFY_PER_PROJECT: '20/1h',
      RATE_LIMIT_PAYOUT_REQUEST_PER_PROJECT: '30/1h',
      // Tests name their client IP with X-Forwarded-For.
      GATEWAY_TRUST_PROXY: 'true',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
  const auth2 = system.current()['auth-2'];
  if (!auth2?.grpcUrl) throw new Error('the second auth replica is missing');
  second = await startGatewayReplica(system, { authUrl: auth2.grpcUrl, env: { GATEWAY_TRUST_PROXY: 'true' } });
  api2 = new GatewayClient(second.url);
  db = postgres(system.database.url, { max: 2, onnotice: () => undefined });
}, 120_000);

afterAll(async () => {
  await db?.end();
  await second?.stop();
  await system?.stop();
  await inbox?.stop();
});

// ------------------------------------------------------------------------------------------------
// helpers

const me = (client: GatewayClient, token: string) => client.get('/api/merchant/me', { headers: bearer(token) });

async function login(merchant: Pick<MerchantFixture, 'email' | 'password'>, client = api): Promise<string> {
  const res = await client.post('/api/merchant/login', { email: merchant.email, password: merchant.password });
  expect(res.status).toBe(200);
  return res.body.token as string;
}

function codeIn(mail: ReceivedMail): string {
  const match = /^\s+(\d{6})\s*$/m.exec(mailText(mail.raw));
  if (!match?.[1]) throw new Error('no code in the email');
  return match[1];
}

/** The newest email verification code sent to `email` (after `after` messages). */
async function emailCode(email: string, after = 0): Promise<string> {
  const mail = await eventually(
    async () => inbox.messages.filter((m) => m.to.includes(email) && mailText(m.raw).includes('email verification code')).slice(after).at(-1),
    15_000,
    `an email verification code for ${email}`,
  );
  return codeIn(mail);
}

async function payoutCode(email: string, payoutId: string): Promise<string> {
  return codeIn(await inbox.waitFor((m) => m.to.includes(email) && mailText(m.raw).includes(payoutId), 15_000));
}

let nextAddress = 0;
function addressOf(currency: CryptoCode, network: Network): string {
  const deriver = createAddressDeriver(generateDevelopmentKeyPair(currency, network).xpub, currency, network);
  if (!deriver.ok) throw new Error(deriver.reason);
  return deriver.value.addressAt(nextAddress++);
}
const testnetAddress = (currency: CryptoCode) => addressOf(currency, 'testnet');

async function balanceOf(key: string, currency: string): Promise<number | undefined> {
  const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(key) });
  return (res.body.balances as Array<{ currency: string; available: number }>).find((b) => b.currency === currency)?.available;
}

/** A sandbox invoice body: 10 USD paid in BTC. */
const TEN_USD_IN_BTC = { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' };

/** A sandbox shop whose sandbox balance holds `amount` BTC (a sandbox-paid invoice). */
async function fundedSandboxShop(amount: number) {
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox');
  const invoice = await api.post(
    '/api/invoice',
    TEN_USD_IN_BTC,
    { headers: apiKeyHeader(project.key) },
  );
  expect(invoice.status).toBe(201);
  expect((await api.post(`/api/invoice/${invoice.body.id}/sandbox/pay`, { amountReceived: amount }, { headers: apiKeyHeader(project.key) })).status).toBe(200);
  await eventually(async () => ((await balanceOf(project.key, 'BTC')) === amount ? true : undefined), 15_000, 'the sandbox balance');
  return { merchant, project };
}

/** Every value of every row of every table of every schema of the database, one line per row. */
async function everyTableText(): Promise<string> {
  const tables = await db<{ schema: string; table: string }[]>`
    select table_schema as schema, table_name as table from information_schema.tables
    where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')`;
  expect(tables.map((t) => `${t.schema}.${t.table}`)).toEqual(expect.arrayContaining(['payout.outbox', 'auth.outbox', 'notifier.outbox', 'invoice.outbox', 'payout.payouts']));
  const parts: string[] = [];
  for (const { schema, table } of tables) {
    const rows = await db.unsafe(`select t::text as row from "${schema}"."${table}" t`);
    for (const row of rows) parts.push(`${schema}.${table}: ${String(row.row)}`);
  }
  return parts.join('\n');
}

/** Every message of every JetStream stream of the test's namespace, headers and data, as text. */
async function everyStreamMessageText(): Promise<{ text: string; count: number }> {
  return withNats(async (nc) => {
    const jsm = await nc.jetstreamManager();
    const parts: string[] = [];
    for await (const stream of jsm.streams.list()) {
      if (!stream.config.name.startsWith(`${system.namespace.toUpperCase()}_`)) continue;
      for (let seq = stream.state.first_seq; seq <= stream.state.last_seq; seq++) {
        const msg = await jsm.streams.getMessage(stream.config.name, { seq }).catch(() => undefined);
        if (!msg) continue;
        const headers = msg.header ? [...msg.header].map(([k, v]) => `${k}: ${v.join(',')}`).join('; ') : '';
        parts.push(`${msg.subject} ${headers} ${new TextDecoder().decode(msg.data)}`);
      }
    }
    return { text: parts.join('\n'), count: parts.length };
  });
}

function logsText(): string {
  const dir = path.join(system.dataDir, 'logs');
  return readdirSync(dir)
    .map((f) => readFileSync(path.join(dir, f), 'utf8'))
    .join('\n');
}

/** The code as a token of its own (ids and timestamps may contain its digits). */
const asToken = (code: string) => new RegExp(`(?<![0-9A-Za-z])${code}(?![0-9A-Za-z])`);

// ------------------------------------------------------------------------------------------------

describe('1. operators are granted by command only', () => {
  test('registering an address named anywhere as operator grants nothing; grant-operator does, audit-logged; revoke-operator ends it at once', async () => {
    const squatter = await registerMerchant(api, { email: SQUATTED_EMAIL });
    // Signing up proved the address (issue 27); being named in ADMIN_EMAILS still grants nothing.
    expect((await me(api, squatter.token)).body).toMatchObject({ isAdmin: false, emailVerified: true });
    const pending = randomUUID();
    expectProblem(await api.post(`/api/admin/payouts/${pending}/complete`, { transactionHash: 'a'.repeat(64) }, { headers: bearer(squatter.token) }), 403, 'forbidden');
    const claims = JSON.parse(Buffer.from(squatter.token.split('.')[1]!, 'base64url').toString());
    expect(claims.admin).toBeUndefined();

    // Nobody registered: refused with a reason, nothing granted.
    const unknown = await authCommand(system, 'grant-operator', `nobody-${randomUUID().slice(0, 6)}@coinvoice.test`).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );
    expect(unknown?.code).toBe(1);
    expect(unknown?.stderr).toContain('register the account first');

    const operator = await registerMerchant(api);
    // An account whose email is not verified (from before sign-up needed the code, or the
    // launcher's local developer): refused with the reason, nothing granted or audited.
    await markEmailUnverified(system, operator.merchantId);
    const unverified = await authCommand(system, 'grant-operator', operator.email, { OPERATOR_ACTOR: 'ops-job/test' }).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );
    expect(unverified?.code).toBe(1);
    expect(unverified?.stderr).toContain(`${operator.email} has not verified its email address`);
    expect((await me(api, operator.token)).body.isAdmin).toBe(false);
    expect(await db`select 1 from auth.operator_audit where merchant_id = ${operator.merchantId}`).toHaveLength(0);

    await markEmailVerified(system, operator.merchantId);
    const before = operator.token;
    const granted = await authCommand(system, 'grant-operator', operator.email, { OPERATOR_ACTOR: 'ops-job/test' });
    expect(granted.stdout).toContain('done');
    // It says which database it wrote to (no password): a grant against the wrong one is seen at once.
    expect(granted.stdout).toContain(`(database ${system.database.url.replace(/:[^:@/]*@/, ':***@')})`);
    // Its sessions ended (the admin claim is in new tokens only), on both gateways.
    await eventually(async () => ((await me(api, before)).status === 401 && (await me(api2, before)).status === 401 ? true : undefined), 3_000, 'the old token refused');
    const token = await login(operator);
    expect((await me(api, token)).body.isAdmin).toBe(true);
    expectProblem(await api.post(`/api/admin/payouts/${pending}/complete`, { transactionHash: 'a'.repeat(64) }, { headers: bearer(token) }), 404, 'not_found');
    const audit = await db`select action, actor, email from auth.operator_audit where merchant_id = ${operator.merchantId} order by id`;
    expect(audit.map((r) => ({ ...r }))).toEqual([{ action: 'grant', actor: 'ops-job/test', email: operator.email }]);

    await authCommand(system, 'revoke-operator', operator.email);
    await eventually(async () => ((await me(api, token)).status === 401 && (await me(api2, token)).status === 401 ? true : undefined), 3_000, 'the operator token refused');
    const after = await login(operator);
    expect((await me(api, after)).body.isAdmin).toBe(false);
    expectProblem(await api.post(`/api/admin/payouts/${pending}/complete`, { transactionHash: 'a'.repeat(64) }, { headers: bearer(after) }), 403, 'forbidden');
    expect((await db`select action from auth.operator_audit where merchant_id = ${operator.merchantId} order by id`).map((r) => r.action)).toEqual(['grant', 'revoke']);
  });

  test('the payout service itself refuses CompletePayout without a valid operator token (called past the gateway)', async () => {
    const payouts = createRpcClient(PayoutService, system.processes.payout.grpcUrl!);
    const merchant = await registerMerchant(api);
    const operatorToken = (await grantOperator(system, api, `ops-${randomUUID().slice(0, 8)}@coinvoice.test`, 'operator-password-1')).token;
    const payoutId = randomUUID();
    const call = (operatorToken: string) => payouts.completePayout({ payoutId, transactionHash: 'a'.repeat(64), operatorToken }).then(() => undefined, errorFacts);
    expect(await call('')).toMatchObject({ code: 'invalid_token' });
    expect(await call('not-a-token')).toMatchObject({ code: 'invalid_token' });
    expect(await call(merchant.token)).toMatchObject({ code: 'forbidden' });
    // A valid operator token gets past the check (and finds no such payout).
    expect(await call(operatorToken)).toMatchObject({ code: 'not_found' });
    expect(await payouts.rejectPayout({ payoutId, adminNote: 'no', operatorToken: merchant.token }).then(() => undefined, errorFacts)).toMatchObject({ code: 'forbidden' });
  });
});

describe('email verification', () => {
  test('an unverified merchant gets a code by email; unverified it works in the sandbox but gets no live key or live payout; the code verifies it', async () => {
    const merchant = await registerMerchant(api);
    // Signing up proved the address (issue 27); accounts from before that, and the launcher's
    // local developer, are unverified and prove it with this flow.
    expect((await me(api, merchant.token)).body.emailVerified).toBe(true);
    await markEmailUnverified(system, merchant.merchantId);
    const auth = bearer(merchant.token);
    expect((await api.post('/api/merchant/email/verification', undefined, { headers: auth })).status).toBe(202);
    const firstCode = await emailCode(merchant.email);
    expect((await me(api, merchant.token)).body.emailVerified).toBe(false);
    // The code is stored only hashed.
    expect(await everyTableText()).not.toMatch(asToken(firstCode));

    // Sandbox: everything works unverified.
    await createProjectWithKey(api, merchant, 'sandbox');
    // Live: the project may exist, its key may not; nor a live payout.
    const live = await api.post('/api/merchant/projects', { name: 'Live shop', environment: 'live' }, { headers: auth });
    expect(live.status).toBe(201);
    expectProblem(await api.post(`/api/merchant/projects/${live.body.id}/api-keys`, { name: 'k' }, { headers: auth }), 403, 'email_not_verified');
    expectProblem(
      await api.post('/api/payout/request', { projectId: live.body.id, amount: 0.001, currency: 'BTC', address: addressOf('BTC', 'mainnet') }, { headers: auth }),
      403,
      'email_not_verified',
    );

    const wrong = String((Number(firstCode) + 1) % 1_000_000).padStart(6, '0');
    expectProblem(await api.post('/api/merchant/email/verify', { code: wrong }, { headers: auth }), 400, 'invalid_verification_code');
    expectProblem(await api.post('/api/merchant/email/verify', { code: '12ab' }, { headers: auth }), 400, 'validation_failed');
    // A new code replaces the first.
    const sent = inbox.messages.filter((m) => m.to.includes(merchant.email) && mailText(m.raw).includes('email verification code')).length;
    expect((await api.post('/api/merchant/email/verification', undefined, { headers: auth })).status).toBe(202);
    const secondCode = await emailCode(merchant.email, sent - 1 >= 0 ? sent : 0);
    if (secondCode !== firstCode) {
      expectProblem(await api.post('/api/merchant/email/verify', { code: firstCode }, { headers: auth }), 400, 'invalid_verification_code');
    }
    const verified = await api.post('/api/merchant/email/verify', { code: secondCode }, { headers: auth });
    expect(verified.status).toBe(200);
    expect(verified.body).toMatchObject({ id: merchant.merchantId, emailVerified: true });
    expect((await api.post(`/api/merchant/projects/${live.body.id}/api-keys`, { name: 'k' }, { headers: auth })).status).toBe(201);
    expectProblem(await api.post('/api/merchant/email/verification', undefined, { headers: auth }), 409, 'email_already_verified');
  });
});

describe('6 and 9. the payout code leaves the payout service only inside the email; sandbox payouts complete by themselves', () => {
  test('after a payout request the emailed code is in no table, outbox row, stream message or log line; verified, the sandbox payout is Completed with a simulated hash', async () => {
    const { merchant, project } = await fundedSandboxShop(0.01);
    const requested = await api.post('/api/payout/request', { amount: 0.004, currency: 'BTC', address: testnetAddress('BTC') }, { headers: apiKeyHeader(project.key) });
    expect(requested.status).toBe(201);
    expect(requested.body).toMatchObject({ status: 'AwaitingVerification', environment: 'sandbox' });
    const code = await payoutCode(merchant.email, requested.body.id);

    // Wait for the request's events to be relayed, so the streams hold everything it produced.
    await eventually(async () => {
      const [row] = await db`select count(*)::int as n from payout.outbox where published_at is null`;
      return row!.n === 0 ? true : undefined;
    }, 10_000, 'the payout outbox to be relayed');
    const streams = await everyStreamMessageText();
    expect(streams.text).toContain(requested.body.id); // payout.requested is there…
    expect(streams.text).not.toMatch(asToken(code)); // …the code is not
    expect(await everyTableText()).not.toMatch(asToken(code));
    expect(logsText()).toContain(requested.body.id);
    expect(logsText()).not.toMatch(asToken(code));

    const verified = await api.post('/api/payout/verify', { payoutId: requested.body.id, code }, { headers: apiKeyHeader(project.key) });
    expect(verified.status).toBe(200);
    expect(verified.body).toMatchObject({ id: requested.body.id, status: 'Completed', environment: 'sandbox', transactionHash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(await balanceOf(project.key, 'BTC')).toBe(0.006);
    // Never in the operators' queue (Pending): it went straight through, and an operator cannot act on it.
    const operator = await grantOperator(system, api, `ops-${randomUUID().slice(0, 8)}@coinvoice.test`, 'operator-password-1');
    const queue = await api.get('/api/admin/payouts?status=Pending', { headers: bearer(operator.token) });
    expect(queue.status).toBe(200);
    expect((queue.body.items as Array<{ id: string }>).map((p) => p.id)).not.toContain(requested.body.id);
    expectProblem(
      await api.post(`/api/admin/payouts/${requested.body.id}/complete`, { transactionHash: 'b'.repeat(64) }, { headers: bearer(operator.token) }),
      409,
      'payout_not_pending',
    );
    const [pendingNow] = await db`select count(*)::int as n from payout.payouts where project_id = ${project.id} and status = 'Pending'`;
    expect(pendingNow!.n).toBe(0);
    expect(logsText()).not.toMatch(asToken(code));
    expect(await everyTableText()).not.toMatch(asToken(code));
  });
});

/** Checks a 429: problem+json rate_limited with Retry-After, RateLimit-Policy and RateLimit naming `policy`. */
function expectRateLimited(res: Awaited<ReturnType<GatewayClient['post']>>, policy: string, limit: number, windowSeconds: number) {
  expectProblem(res, 429, 'rate_limited');
  const retryAfter = Number(res.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(windowSeconds);
  expect(res.headers.get('ratelimit-policy')).toBe(`"${policy}";q=${limit};w=${windowSeconds}`);
  expect(res.headers.get('ratelimit')).toBe(`"${policy}";r=0;t=${retryAfter}`);
}

let nextIp = 1;
/** A client IP of its own (the gateways trust X-Forwarded-For in this file). */
const freshIp = () => ({ 'x-forwarded-for': `203.0.113.${nextIp++}` });

describe('2. login and registration are rate limited across replicas', () => {
  // Each test counts calls up to a limit of a 15-minute or 1-hour window: never across two.
  beforeEach(() => awayFromWindowEdge(15 * 60), 70_000);

  test('30 wrong passwords for one account from one client, alternating two gateways on two auth replicas: 429 with Retry-After from the 11th; the right password from that client waits too, the owner elsewhere is not locked out', async () => {
    const merchant = await registerMerchant(api);
    const ip = freshIp();
    const statuses: number[] = [];
    let firstRefusal: Awaited<ReturnType<GatewayClient['post']>> | undefined;
    for (let i = 0; i < 30; i++) {
      const res = await [api, api2][i % 2]!.post('/api/merchant/login', { email: merchant.email, password: `wrong-password-${i}` }, { headers: ip });
      statuses.push(res.status);
      if (res.status === 429 && !firstRefusal) firstRefusal = res;
    }
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual(Array(20).fill(429));
    expectRateLimited(firstRefusal!, 'login-account', 10, 900);
    // The right password from the same client waits as well, on either gateway.
    for (const client of [api, api2]) {
      expectRateLimited(await client.post('/api/merchant/login', { email: merchant.email, password: merchant.password }, { headers: ip }), 'login-account', 10, 900);
    }
    // A stranger's wrong passwords do not lock the owner out (issue 27): from another address the
    // owner logs in at once, on either gateway.
    for (const client of [api, api2]) {
      expect((await client.post('/api/merchant/login', { email: merchant.email, password: merchant.password }, { headers: freshIp() })).status).toBe(200);
    }
    // Another account is not affected.
    const other = await registerMerchant(api);
    expect((await api2.post('/api/merchant/login', { email: other.email, password: other.password }, { headers: ip })).status).toBe(200);
  });

  test('an IPv6 client is counted by its /64: wrong passwords from a fresh address of the same /64 each time answer 429 from the 11th; another /64 is not refused (docs/http-edge.md#client-addresses)', async () => {
    const merchant = await registerMerchant(api);
    const statuses: number[] = [];
    for (let i = 0; i < 14; i++) {
      const ip = { 'x-forwarded-for': `2001:db8:77:${nextIp}:${(i + 1).toString(16)}::${(i * 7 + 3).toString(16)}` };
      statuses.push((await [api, api2][i % 2]!.post('/api/merchant/login', { email: merchant.email, password: `wrong-password-${i}` }, { headers: ip })).status);
    }
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual(Array(4).fill(429));
    const otherNetwork = { 'x-forwarded-for': `2001:db8:77:${nextIp + 1}::1` };
    nextIp += 2;
    expect((await api.post('/api/merchant/login', { email: merchant.email, password: merchant.password }, { headers: otherNetwork })).status).toBe(200);
  });

  test('a session token cannot try current passwords faster than a login: password changes answer 429 from the 11th, the right one too, across replicas; login is not locked', async () => {
    const merchant = await registerMerchant(api);
    const statuses: number[] = [];
    let firstRefusal: Awaited<ReturnType<GatewayClient['post']>> | undefined;
    for (let i = 0; i < 14; i++) {
      // A fresh client IP each time: the limit is the account's, not an address's.
      const res = await [api, api2][i % 2]!.post(
        '/api/merchant/password',
        { currentPassword: `wrong-password-${i}`, newPassword: 'attacker-chosen-password' },
        { headers: { ...bearer(merchant.token), ...freshIp() } },
      );
      statuses.push(res.status);
      if (res.status === 429 && !firstRefusal) firstRefusal = res;
    }
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual(Array(4).fill(429));
    expectRateLimited(firstRefusal!, 'password-change', 10, 900);
    // The right current password waits as well: the guess that would take the account over.
    for (const client of [api, api2]) {
      expectRateLimited(
        await client.post('/api/merchant/password', { currentPassword: merchant.password, newPassword: 'attacker-chosen-password' }, { headers: bearer(merchant.token) }),
        'password-change',
        10,
        900,
      );
    }
    // Nothing changed: the owner's password still logs in, the session still works.
    expect((await api.post('/api/merchant/login', { email: merchant.email, password: merchant.password }, { headers: freshIp() })).status).toBe(200);
    expect((await api.get('/api/merchant/me', { headers: bearer(merchant.token) })).status).toBe(200);
    // Another merchant's password change is not affected.
    const other = await registerMerchant(api);
    expect((await api2.post('/api/merchant/password', { currentPassword: other.password, newPassword: 'a-new-long-password' }, { headers: bearer(other.token) })).status).toBe(200);
  });

  test('registrations per client IP, alternating two gateways: the 26th answers 429', async () => {
    const ip = freshIp();
    const statuses: number[] = [];
    let refusal: Awaited<ReturnType<GatewayClient['post']>> | undefined;
    for (let i = 0; i < 26; i++) {
      const res = await [api, api2][i % 2]!.post(
        '/api/merchant/register',
        { email: `flood-${i}-${randomUUID().slice(0, 6)}@example.com`, password: 'a-long-password', name: 'Flood' },
        { headers: ip },
      );
      statuses.push(res.status);
      if (res.status === 429) refusal = res;
    }
    expect(statuses.slice(0, 25)).toEqual(Array(25).fill(202));
    expect(statuses[25]).toBe(429);
    expectRateLimited(refusal!, 'register-ip', 25, 3600);
    // Another address still registers.
    expect((await api2.post('/api/merchant/register', { email: `calm-${randomUUID().slice(0, 6)}@example.com`, password: 'a-long-password', name: 'Calm' }, { headers: freshIp() })).status).toBe(202);
  });
});

describe('3. payout codes cannot be farmed', () => {
  // Each test counts calls up to a limit of a 15-minute or 1-hour window: never across two.
  beforeEach(() => awayFromWindowEdge(15 * 60), 70_000);

  test('40 verification attempts across fresh payouts of one project: 429 from the 21st', async () => {
    const { project } = await fundedSandboxShop(0.01);
    const key = apiKeyHeader(project.key);
    const statuses: number[] = [];
    let refusal: Awaited<ReturnType<GatewayClient['post']>> | undefined;
    let payoutId = '';
    let attemptsOnPayout = 5;
    for (let i = 0; i < 40; i++) {
      if (attemptsOnPayout === 5) {
        // A fresh payout (the last one was cancelled by its 5th wrong code).
        const created = await api.post('/api/payout/request', { amount: 0.001, currency: 'BTC', address: testnetAddress('BTC') }, { headers: key });
        expect(created.status).toBe(201);
        payoutId = created.body.id;
        attemptsOnPayout = 0;
      }
      const res = await api.post('/api/payout/verify', { payoutId, code: String(100000 + i) }, { headers: key });
      statuses.push(res.status);
      if (res.status === 429 && !refusal) refusal = res;
      if (res.status === 400) attemptsOnPayout++; // refused by the limit: the same payout is tried again
    }
    expect(statuses.slice(0, 20)).toEqual(Array(20).fill(400));
    expect(statuses.slice(20).every((s) => s === 429)).toBe(true);
    expectRateLimited(refusal!, 'payout-verify-project', 20, 3600);
  });
});

describe('3. payout requests per project', () => {
  test('at most 3 payouts of a project await verification at once', async () => {
    const { project } = await fundedSandboxShop(0.01);
    const request = () => api.post('/api/payout/request', { amount: 0.001, currency: 'BTC', address: testnetAddress('BTC') }, { headers: apiKeyHeader(project.key) });
    const first = [await request(), await request(), await request()];
    expect(first.map((r) => r.status)).toEqual([201, 201, 201]);
    expectProblem(await request(), 409, 'too_many_unverified_payouts');
    expect((await api.post(`/api/payout/${first[0]!.body.id}/cancel`, undefined, { headers: apiKeyHeader(project.key) })).status).toBe(200);
    expect((await request()).status).toBe(201);
  });
});

/** The database as `pg_dump` writes it (schema and data of every schema), or every row as text without pg_dump. */
async function databaseDump(): Promise<{ text: string; tool: string }> {
  try {
    const { stdout } = await promisify(execFile)('pg_dump', ['--no-owner', system.database.url], { maxBuffer: 256 * 1024 * 1024 });
    return { text: stdout, tool: 'pg_dump' };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    return { text: await everyTableText(), tool: 'row scan' };
  }
}

describe('7. secrets at rest are envelope-encrypted with SECRETS_KEK', () => {
  test('a database dump holds no webhook secret and no signing key; what is stored opens with the KEK only', async () => {
    const merchant = await registerMerchant(api);
    const created = await api.post('/api/merchant/projects', { name: 'Hooked', environment: 'sandbox', webhookUrl: 'https://shop.example/hook' }, { headers: bearer(merchant.token) });
    expect(created.status).toBe(201);
    const rotated = await api.post(`/api/merchant/projects/${created.body.id}/webhook-secret/rotate`, undefined, { headers: bearer(merchant.token) });
    expect(rotated.status).toBe(200);
    const secrets = [created.body.webhookSecret as string, rotated.body.webhookSecret as string];

    const dump = await databaseDump();
    expect(dump.text).toContain(created.body.id); // the project is in the dump…
    for (const secret of secrets) {
      expect(dump.text).not.toContain(secret); // …its secrets are not,
      expect(dump.text).not.toContain(secret.slice('whsec_'.length, 'whsec_'.length + 24)); // not even their key material
    }
    expect(dump.text).not.toMatch(/PRIVATE KEY/);

    // The stored values open with this system's KEK (key id stored next to them), and are what auth serves.
    const box = new SecretBox(kekFromBytes(KEK));
    const [project] = await db`select webhook_secret, webhook_secret_kek_id from auth.projects where id = ${created.body.id}`;
    expect(project!.webhook_secret_kek_id).toBe(box.current.id);
    expect(box.decrypt(project!.webhook_secret, `projects.webhook_secret:${created.body.id}`)).toBe(secrets[1]);
    const keys = await db`select kid, private_key_pem, private_key_kek_id from auth.signing_keys`;
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      expect(key.private_key_kek_id).toBe(box.current.id);
      const pem = box.decrypt(key.private_key_pem, `signing_keys.private_key_pem:${key.kid}`);
      expect(signingKeyFromPem(pem).kid).toBe(key.kid);
      expect(dump.text).not.toContain(pem.split('\n')[1]!);
    }
    // Another KEK opens nothing.
    const other = new SecretBox(kekFromBytes(randomBytes(32)));
    expect(() => other.decrypt(project!.webhook_secret, `projects.webhook_secret:${created.body.id}`)).toThrow(/not configured/);
  });
});

describe('8. sessions end on logout and password change, on every replica, within 1 s', () => {
  /** Milliseconds until `token` answers 401 on each gateway (Infinity if not within 3 s). */
  async function refusedWithin(token: string, since: number): Promise<number[]> {
    return Promise.all(
      [api, api2].map(async (client) => {
        while (Date.now() - since < 3_000) {
          if ((await me(client, token)).status === 401) return Date.now() - since;
          await new Promise((r) => setTimeout(r, 20));
        }
        return Number.POSITIVE_INFINITY;
      }),
    );
  }

  test('logout', async () => {
    const merchant = await registerMerchant(api);
    const other = await login(merchant, api2);
    for (const client of [api, api2]) for (const token of [merchant.token, other]) expect((await me(client, token)).status).toBe(200);
    const res = await api.post('/api/merchant/logout', undefined, { headers: bearer(merchant.token) });
    expect(res.status).toBe(204);
    const at = Date.now();
    for (const ms of await refusedWithin(merchant.token, at)) expect(ms).toBeLessThan(1_000);
    for (const ms of await refusedWithin(other, at)) expect(ms).toBeLessThan(1_000);
    // Logging in again works.
    expect((await me(api2, await login(merchant, api2))).status).toBe(200);
  });

  test('password change', async () => {
    const merchant = await registerMerchant(api);
    expectProblem(
      await api.post('/api/merchant/password', { currentPassword: 'wrong-password', newPassword: 'a-new-long-password' }, { headers: bearer(merchant.token) }),
      401,
      'invalid_credentials',
    );
    const changed = await api2.post('/api/merchant/password', { currentPassword: merchant.password, newPassword: 'a-new-long-password' }, { headers: bearer(merchant.token) });
    expect(changed.status).toBe(200);
    const at = Date.now();
    for (const ms of await refusedWithin(merchant.token, at)) expect(ms).toBeLessThan(1_000);
    for (const client of [api, api2]) expect((await me(client, changed.body.token)).status).toBe(200);
    expectProblem(await api.post('/api/merchant/login', { email: merchant.email, password: merchant.password }), 401, 'invalid_credentials');
    expect((await api.post('/api/merchant/login', { email: merchant.email, password: 'a-new-long-password' })).status).toBe(200);
  });

  test('a gateway cut off from NATS (the revocation feed) still ends sessions within about a second: it reads them from auth meanwhile (an outside review used a token for the whole outage)', async () => {
    const natsPort = Number(new URL(testNatsUrl()).port);
    const nats = await new TcpProxy(natsPort).start();
    const cutOff = await startGatewayReplica(system, { env: { NATS_URL: `nats://127.0.0.1:${nats.port}` } });
    try {
      const client = new GatewayClient(cutOff.url);
      const merchant = await registerMerchant(api);
      expect((await me(client, merchant.token)).status).toBe(200);
      await nats.stop(); // this replica's NATS is gone
      await new Promise((r) => setTimeout(r, 300));
      expect((await me(client, merchant.token)).status).toBe(200);
      expect((await api.post('/api/merchant/logout', undefined, { headers: bearer(merchant.token) })).status).toBe(204);
      const at = Date.now();
      let refusedAfter = Number.POSITIVE_INFINITY;
      while (Date.now() - at < 5_000) {
        if ((await me(client, merchant.token)).status === 401) {
          refusedAfter = Date.now() - at;
          break;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(refusedAfter).toBeLessThan(1_500);
      // A session that was not ended still works through it.
      expect((await me(client, await login(merchant, api))).status).toBe(200);
    } finally {
      await cutOff.stop();
      await nats.stop().catch(() => undefined);
    }
  });

  test('a gateway started after a logout refuses the old token too', async () => {
    const merchant = await registerMerchant(api);
    expect((await api.post('/api/merchant/logout', undefined, { headers: bearer(merchant.token) })).status).toBe(204);
    const late = await startGatewayReplica(system);
    try {
      expectProblem(await me(new GatewayClient(late.url), merchant.token), 401, 'invalid_token');
    } finally {
      await late.stop();
    }
  });
});

describe('live payouts are verified before an operator sees them', () => {
  test('a verified merchant requests a live payout; verified it waits (Pending) for an operator', async () => {
    const merchant = await registerMerchant(api);
    await markEmailVerified(system, merchant.merchantId);
    const project = await createProjectWithKey(api, merchant, 'live');
    await publishLivePayment(system, { projectId: project.id, currency: 'BTC', amount: '0.01' });
    await eventually(async () => ((await balanceOf(project.key, 'BTC')) === 0.01 ? true : undefined), 15_000, 'the live balance');
    const requested = await api.post('/api/payout/request', { amount: 0.002, currency: 'BTC', address: addressOf('BTC', 'mainnet') }, { headers: apiKeyHeader(project.key) });
    expect(requested.status).toBe(201);
    expect(requested.body.environment).toBe('live');
    const code = await payoutCode(merchant.email, requested.body.id);
    const verified = await api.post('/api/payout/verify', { payoutId: requested.body.id, code }, { headers: apiKeyHeader(project.key) });
    expect(verified.body).toMatchObject({ status: 'Pending', environment: 'live', transactionHash: null });
  });
});

describe('low findings', () => {
  test('/readyz names an unreachable backend without its error text', async () => {
    const broken = await startGatewayReplica(system, { env: { INVOICE_URL: 'http://127.0.0.1:9' }, aliveOnly: true });
    try {
      const res = await new GatewayClient(broken.url).get('/readyz');
      expect(res.status).toBe(503);
      expect(res.body.backends.invoice).toBe('UNREACHABLE');
      expect(res.text).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|:9\b|connect/i);
      // A replica that never reached a backend gets no traffic either (a misconfigured rollout).
      expect((await new GatewayClient(broken.url).get('/readyz?scope=traffic')).status).toBe(503);
    } finally {
      await broken.stop();
    }
  });

  test('a backend that goes away after serving does not take the gateway out of traffic: the requests that need no notifier go on (an outside review\'s cascade)', async () => {
    const proxyTo = (name: 'auth' | 'invoice' | 'payout' | 'notifier') => new TcpProxy(Number(new URL(system.processes[name].grpcUrl!).port)).start();
    const [auth, invoices, payouts, notifier] = await Promise.all([proxyTo('auth'), proxyTo('invoice'), proxyTo('payout'), proxyTo('notifier')]);
    const replica = await startGatewayReplica(system, { env: { AUTH_URL: auth.url, INVOICE_URL: invoices.url, PAYOUT_URL: payouts.url, NOTIFIER_URL: notifier.url } });
    try {
      const client = new GatewayClient(replica.url);
      expect((await client.get('/readyz?scope=traffic')).status).toBe(200);
      await notifier.stop();
      const overall = await client.get('/readyz');
      expect(overall.status).toBe(503);
      expect(overall.body.backends.notifier).toBe('UNREACHABLE');
      const traffic = await client.get('/readyz?scope=traffic');
      expect([traffic.status, traffic.body.backends.notifier]).toEqual([200, 'UNREACHABLE']);
      const merchant = await registerMerchant(api);
      const project = await createProjectWithKey(api, merchant, 'sandbox');
      const invoice = await client.post(
        '/api/invoice',
        TEN_USD_IN_BTC,
        { headers: apiKeyHeader(project.key) },
      );
      expect(invoice.status).toBe(201);
      // Not one backend answering: this replica is cut off, the traffic should go elsewhere.
      for (const proxy of [auth, invoices, payouts]) await proxy.stop();
      expect((await client.get('/readyz?scope=traffic')).status).toBe(503);
    } finally {
      await replica.stop();
      for (const proxy of [auth, invoices, payouts, notifier]) await proxy.stop().catch(() => undefined);
    }
  });

  test('/pay/assets looks names up as names: an inherited property is a 404, not a 500', async () => {
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      const res = await api.get(`/pay/assets/${name}`);
      expect(res.status).toBe(404);
    }
    expect((await api.get('/pay/assets/checkout.js')).status).toBe(200);
  });
});
