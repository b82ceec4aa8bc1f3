/**
 * Issue 3, through the gateway, against the whole system as real processes: merchants, projects,
 * API keys, sessions, revocation across two gateways, and one error model for bad input.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomUUID, sign as edSign } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { generateApiKey, parseApiKey } from '@coinvoice/domain/credentials/api-keys';
import { generateSigningKey, signSessionToken, signingKeyFromPem } from '@coinvoice/domain/credentials/jwt';
import { DEVELOPMENT_KEK_BASE64, kekFromBytes, SecretBox } from '@coinvoice/domain/secrets-at-rest';
import { createRpcClient } from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import fc from 'fast-check';
import postgres from 'postgres';
import { freePortForTest } from '../support/ports';
import { awaitSignUpCode, mailHeader, mailText, signUpCodesIn } from '../../deploy/local/src/mailbox';
import { apiKeyHeader, bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant } from '../support/http';
import { systemEventKeys } from '../support/event-keys';
import { bootSystem, REPO_ROOT, type BootedSystem } from '../support/system';

let system: BootedSystem;
let api: GatewayClient;
let db: postgres.Sql;
beforeAll(async () => {
  system = await bootSystem();
  api = new GatewayClient(system.gatewayUrl);
  db = postgres(system.database.url, { max: 2, onnotice: () => undefined });
}, 90_000);

afterAll(async () => {
  await db?.end();
  await system?.stop();
});

function logsText(): string {
  const dir = path.join(system.dataDir, 'logs');
  return readdirSync(dir).map((f) => readFileSync(path.join(dir, f), 'utf8')).join('\n');
}

/** Every text value of every row of every table of every coinvoice schema, as one string. */
async function wholeDatabaseText(): Promise<string> {
  const tables = await db<{ schema: string; table: string }[]>`
    select table_schema as schema, table_name as table from information_schema.tables
    where table_schema in ('auth', 'invoice', 'payout', 'notifier') and table_type = 'BASE TABLE'`;
  const parts: string[] = [];
  for (const { schema, table } of tables) {
    const rows = await db.unsafe(`select row_to_json(t)::text as j from "${schema}"."${table}" t`);
    for (const row of rows) parts.push(String(row.j));
  }
  return parts.join('\n');
}

describe('register → login → project → key', () => {
  test('a sandbox key starts with SBX_, authenticates invoice routes, and is stored and shown nowhere else', async () => {
    const merchant = await registerMerchant(api);
    const login = await api.post('/api/merchant/login', { email: merchant.email.toUpperCase(), password: merchant.password });
    expect(login.status).toBe(200);
    expect(login.body).toEqual({ token: expect.any(String), expiresAt: expect.any(String) });
    expect(new Date(login.body.expiresAt).getTime()).toBeGreaterThan(Date.now());

    const me = await api.get('/api/merchant/me', { headers: bearer(login.body.token) });
    expect(me.status).toBe(200);
    expect(me.body).toEqual({ id: merchant.merchantId, email: merchant.email, name: 'Test Merchant', isAdmin: false, createdAt: expect.any(String), emailVerified: true });

    const project = await createProjectWithKey(api, { ...merchant, token: login.body.token }, 'sandbox');
    expect(project.key).toMatch(/^SBX_[0-9A-Za-z]{40}$/);

    // Authenticated: an unknown invoice is 404, not 401.
    const unknownInvoice = await api.get(`/api/invoice/${randomUUID()}`, { headers: apiKeyHeader(project.key) });
    expectProblem(unknownInvoice, 404, 'not_found');

    const listed = await api.get(`/api/merchant/projects/${project.id}/api-keys`, { headers: bearer(merchant.token) });
    expect(listed.status).toBe(200);
    expect(listed.body.items).toEqual([
      { id: project.keyId, name: 'test key', prefix: project.key.slice(0, listed.body.items[0].prefix.length), createdAt: expect.any(String), revokedAt: null, lastUsedAt: expect.anything() },
    ]);
    expect(listed.text).not.toContain(project.key);
    expect(listed.body.items[0].prefix.length).toBeLessThan(project.key.length / 2);

    expect(await wholeDatabaseText()).not.toContain(project.key.slice(4));
    expect(logsText()).not.toContain(project.key.slice(4));
  });

  test('a live project key starts with LIVE_', async () => {
    const merchant = await registerMerchant(api); // signed up with the emailed code: verified, as live keys need
    const project = await createProjectWithKey(api, merchant, 'live');
    expect(project.key).toMatch(/^LIVE_[0-9A-Za-z]{40}$/);
    expectProblem(await api.get(`/api/invoice/${randomUUID()}`, { headers: apiKeyHeader(project.key) }), 404, 'not_found');
  });

  test('the request id reaches the auth service through gRPC metadata', async () => {
    const requestId = `trace-${randomUUID()}`;
    await api.post('/api/merchant/login', { email: 'nobody@example.com', password: 'whatever-123' }, { headers: { 'x-request-id': requestId } });
    await new Promise((r) => setTimeout(r, 300));
    const authLog = readFileSync(path.join(system.dataDir, 'logs', 'auth.log'), 'utf8');
    expect(authLog).toContain(requestId);
  });
});

describe('API key refusals', () => {
  let key: string;
  beforeAll(async () => {
    key = (await createProjectWithKey(api, await registerMerchant(api), 'sandbox')).key;
  });

  test('a missing header, a well-formed unknown key and a revoked key answer 401 problem+json', async () => {
    expectProblem(await api.get(`/api/invoice/${randomUUID()}`), 401, 'invalid_api_key');
    const unknown = generateApiKey('sandbox'); // well-formed, checksum right, never issued
    expect(parseApiKey(unknown).wellFormed).toBe(true);
    const merchant = await registerMerchant(api);
    const other = await createProjectWithKey(api, merchant, 'sandbox');
    const del = await api.delete(`/api/merchant/projects/${other.id}/api-keys/${other.keyId}`, { headers: bearer(merchant.token) });
    expect(del.status).toBe(204);
    expectProblem(await api.get(`/api/invoice/${randomUUID()}`, { headers: apiKeyHeader(other.key) }), 401, 'invalid_api_key');
    expectProblem(await api.get(`/api/invoice/${randomUUID()}`, { headers: apiKeyHeader(unknown) }), 401, 'invalid_api_key');
  });

  test('credentials are judged before the body: a bad key with a bad body answers 401', async () => {
    const res = await api.post('/api/invoice', { priceAmount: 19.9 }, { headers: apiKeyHeader('SBX_nope') });
    expectProblem(res, 401, 'invalid_api_key');
    expectProblem(await api.post('/api/merchant/projects', { nonsense: true }), 401);
  });

  test('a key with a broken checksum is refused without asking the auth service (auth paused)', async () => {
    const broken = key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a');
    process.kill(system.processes.auth.pid, 'SIGSTOP');
    try {
      const started = Date.now();
      const res = await api.get(`/api/invoice/${randomUUID()}`, { headers: apiKeyHeader(broken) });
      expectProblem(res, 401, 'invalid_api_key');
      expect(Date.now() - started).toBeLessThan(500);
    } finally {
      process.kill(system.processes.auth.pid, 'SIGCONT');
    }
  });
});

describe('revocation across gateway replicas', () => {
  let second: ChildProcess;
  let secondUrl: string;

  beforeAll(async () => {
    const port = await freePortForTest();
    secondUrl = `http://127.0.0.1:${port}`;
    second = spawn(process.execPath, [path.join(REPO_ROOT, 'gateway/dist/main.js')], {
      env: {
        ...process.env,
        GATEWAY_PORT: String(port),
        AUTH_URL: system.processes.auth.grpcUrl,
        INVOICE_URL: system.processes.invoice.grpcUrl,
        PAYOUT_URL: system.processes.payout.grpcUrl,
        NOTIFIER_URL: system.processes.notifier.grpcUrl,
        NATS_URL: process.env.COINVOICE_TEST_NATS_URL,
        EVENT_NAMESPACE: system.namespace,
        EVENT_VERIFY_KEYS: systemEventKeys(system).verifyKeys,
        LOG_LEVEL: 'silent',
      },
      stdio: 'ignore',
    });
    for (let i = 0; i < 100; i++) {
      const ok = await fetch(`${secondUrl}/readyz`).then((r) => r.status === 200, () => false);
      if (ok) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('second gateway did not become ready');
  });

  afterAll(() => {
    second?.kill('SIGTERM');
  });

  test('both gateways refuse a revoked key within 1 second of the revoke call', async () => {
    const merchant = await registerMerchant(api);
    const project = await createProjectWithKey(api, merchant, 'sandbox');
    const gateways = [api, new GatewayClient(secondUrl)];
    const probe = (g: GatewayClient) => g.get(`/api/invoice/${randomUUID()}`, { headers: apiKeyHeader(project.key) });
    for (const g of gateways) expect((await probe(g)).status).toBe(404); // served, so cached

    const revoked = await api.delete(`/api/merchant/projects/${project.id}/api-keys/${project.keyId}`, { headers: bearer(merchant.token) });
    expect(revoked.status).toBe(204);
    const revokedAt = Date.now();
    const refusedAfter = await Promise.all(
      gateways.map(async (g) => {
        while (Date.now() - revokedAt < 3_000) {
          if ((await probe(g)).status === 401) return Date.now() - revokedAt;
          await new Promise((r) => setTimeout(r, 20));
        }
        return Number.POSITIVE_INFINITY;
      }),
    );
    for (const ms of refusedAfter) expect(ms).toBeLessThan(1_000);
  });
});

describe('isolation between merchants and login', () => {
  test("a merchant cannot see or change another merchant's project or keys (404)", async () => {
    const owner = await registerMerchant(api);
    const intruder = await registerMerchant(api);
    const project = await createProjectWithKey(api, owner, 'sandbox');
    const as = bearer(intruder.token);
    expectProblem(await api.get(`/api/merchant/projects/${project.id}`, { headers: as }), 404, 'not_found');
    expectProblem(await api.patch(`/api/merchant/projects/${project.id}`, { name: 'mine now' }, { headers: as }), 404, 'not_found');
    expectProblem(await api.get(`/api/merchant/projects/${project.id}/api-keys`, { headers: as }), 404, 'not_found');
    expectProblem(await api.post(`/api/merchant/projects/${project.id}/api-keys`, { name: 'x' }, { headers: as }), 404, 'not_found');
    expectProblem(await api.delete(`/api/merchant/projects/${project.id}/api-keys/${project.keyId}`, { headers: as }), 404, 'not_found');
    expectProblem(await api.post(`/api/merchant/projects/${project.id}/webhook-secret/rotate`, undefined, { headers: as }), 404, 'not_found');
    const list = await api.get('/api/merchant/projects', { headers: as });
    expect(list.body.items).toEqual([]);
    // The owner's key still works: nothing was changed.
    expect((await api.get(`/api/invoice/${randomUUID()}`, { headers: apiKeyHeader(project.key) })).status).toBe(404);
  });

  test('a wrong password and an unknown email answer the same 401 in comparable time', async () => {
    const merchant = await registerMerchant(api);
    const wrong = await api.post('/api/merchant/login', { email: merchant.email, password: 'not-the-password' });
    const unknown = await api.post('/api/merchant/login', { email: `nobody-${randomUUID()}@example.com`, password: 'not-the-password' });
    expectProblem(wrong, 401);
    expectProblem(unknown, 401);
    expect(unknown.body.code).toBe(wrong.body.code);
    expect(unknown.body.detail).toBe(wrong.body.detail);

    const time = async (email: string) => {
      const t = process.hrtime.bigint();
      await api.post('/api/merchant/login', { email, password: 'not-the-password' });
      return Number(process.hrtime.bigint() - t) / 1e6;
    };
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const known: number[] = [];
    const missing: number[] = [];
    for (let i = 0; i < 9; i++) {
      known.push(await time(merchant.email));
      missing.push(await time(`nobody-${i}-${randomUUID()}@example.com`));
    }
    const ratio = median(missing) / median(known);
    expect(ratio).toBeGreaterThan(0.5);
    expect(ratio).toBeLessThan(2);
  });

  test('emails are unique case-insensitively: registering one again in another case makes no second account', async () => {
    const merchant = await registerMerchant(api);
    const again = await api.post('/api/merchant/register', { email: merchant.email.toUpperCase(), password: 'another-password', name: 'Copy' });
    expect(again.status).toBe(202);
    const [row] = await db<{ count: string }[]>`select count(*) from auth.merchants where email = ${merchant.email}`;
    expect(row?.count).toBe('1');
  });
});

describe('sign-up confirmed by the emailed code: register tells nobody which emails exist (issue 27)', () => {
  const mailFor = (email: string) => system.mail.messages().filter((raw) => mailHeader(raw, 'To')?.includes(email));
  const newEmail = () => `s-${randomUUID().slice(0, 8)}@example.com`;
  /** A code that is not `code`. */
  const otherThan = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, '0');
  /** A problem body without what differs per request. */
  const comparable = (body: Record<string, unknown>) => ({ ...body, requestId: undefined, instance: undefined });

  test('a registered and a new email get the same answer (202, same keys, no account, no token); the owner is told by email, the newcomer gets a code', async () => {
    const owner = await registerMerchant(api);
    const fresh = newEmail();
    const taken = await api.post('/api/merchant/register', { email: owner.email.toUpperCase(), password: 'attacker-password', name: 'Copy' });
    const created = await api.post('/api/merchant/register', { email: fresh, password: 'attacker-password', name: 'Copy' });
    expect(taken.status).toBe(202);
    expect(created.status).toBe(202);
    expect(Object.keys(taken.body).sort()).toEqual(['codeExpiresAt', 'email']);
    expect(Object.keys(created.body).sort()).toEqual(Object.keys(taken.body).sort());
    expect(taken.body.email).toBe(owner.email);
    expect(taken.text).not.toMatch(/token|merchant|"id"/);
    expect(Math.abs(new Date(taken.body.codeExpiresAt).getTime() - new Date(created.body.codeExpiresAt).getTime())).toBeLessThan(10_000);

    // The owner: a note that someone tried, and no code; the newcomer: a code.
    const ownerNote = await eventuallyFound(() => mailFor(owner.email).find((raw) => mailText(raw).includes('Someone tried to create a coinvoice account')));
    expect(mailHeader(ownerNote, 'Subject')).toMatch(/tried to sign up/);
    expect(signUpCodesIn(mailFor(owner.email), owner.email)).toHaveLength(1); // the owner's own sign-up only
    const [code] = [await awaitSignUpCode(() => system.mail.messages(), fresh)];
    expect(code).toMatch(/^\d{6}$/);
    // The owner's password still logs in; the attacker's does not.
    expect((await api.post('/api/merchant/login', { email: owner.email, password: owner.password })).status).toBe(200);
    expectProblem(await api.post('/api/merchant/login', { email: owner.email, password: 'attacker-password' }), 401, 'invalid_credentials');
  });

  test('confirm creates the account with its email verified, signed in and able to log in', async () => {
    const email = newEmail();
    expect((await api.post('/api/merchant/register', { email, password: 'a-long-password', name: 'Confirmed shop' })).status).toBe(202);
    // No account before the code.
    expectProblem(await api.post('/api/merchant/login', { email, password: 'a-long-password' }), 401, 'invalid_credentials');
    const code = await awaitSignUpCode(() => system.mail.messages(), email);
    const confirmed = await api.post('/api/merchant/register/confirm', { email: email.toUpperCase(), code, password: 'a-long-password' });
    expect(confirmed.status).toBe(201);
    expect(confirmed.body).toEqual({
      merchant: { id: expect.any(String), email, name: 'Confirmed shop', isAdmin: false, createdAt: expect.any(String), emailVerified: true },
      token: expect.any(String),
      expiresAt: expect.any(String),
    });
    expect((await api.get('/api/merchant/me', { headers: bearer(confirmed.body.token) })).body).toMatchObject({ email, emailVerified: true });
    expect((await api.post('/api/merchant/login', { email, password: 'a-long-password' })).status).toBe(200);
  });

  test('a wrong code, an unknown email and a registered email answer identically', async () => {
    const pending = newEmail();
    await api.post('/api/merchant/register', { email: pending, password: 'a-long-password', name: 'P' });
    const code = await awaitSignUpCode(() => system.mail.messages(), pending);
    const owner = await registerMerchant(api);
    await api.post('/api/merchant/register', { email: owner.email, password: 'attacker-password', name: 'X' });

    const wrong = await api.post('/api/merchant/register/confirm', { email: pending, code: otherThan(code), password: 'a-long-password' });
    const unknown = await api.post('/api/merchant/register/confirm', { email: newEmail(), code, password: 'a-long-password' });
    const registered = await api.post('/api/merchant/register/confirm', { email: owner.email, code, password: 'a-long-password' });
    expectProblem(wrong, 400, 'invalid_verification_code');
    for (const other of [unknown, registered]) {
      expect(other.status).toBe(wrong.status);
      expect(comparable(other.body)).toEqual(comparable(wrong.body));
    }
  });

  test('two confirmations at once create one account', async () => {
    const email = newEmail();
    await api.post('/api/merchant/register', { email, password: 'a-long-password', name: 'Race' });
    const code = await awaitSignUpCode(() => system.mail.messages(), email);
    const results = await Promise.all(Array.from({ length: 4 }, () => api.post('/api/merchant/register/confirm', { email, code, password: 'a-long-password' })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 400, 400, 400]);
    for (const refused of results.filter((r) => r.status === 400)) expectProblem(refused, 400, 'invalid_verification_code');
    const [row] = await db<{ count: string }[]>`select count(*) from auth.merchants where email = ${email}`;
    expect(row?.count).toBe('1');
  });

  test('five wrong codes use up the sign-up: the right code is then refused (409 verification_code_expired), no account', async () => {
    const email = newEmail();
    await api.post('/api/merchant/register', { email, password: 'a-long-password', name: 'Guess' });
    const code = await awaitSignUpCode(() => system.mail.messages(), email);
    for (let i = 0; i < 5; i++) expectProblem(await api.post('/api/merchant/register/confirm', { email, code: otherThan(code), password: 'a-long-password' }), 400, 'invalid_verification_code');
    expectProblem(await api.post('/api/merchant/register/confirm', { email, code, password: 'a-long-password' }), 409, 'verification_code_expired');
    expectProblem(await api.post('/api/merchant/login', { email, password: 'a-long-password' }), 401, 'invalid_credentials');
  });
});

async function eventuallyFound<T>(find: () => T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error('not found in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('session tokens', () => {
  const b64url = (x: object | Buffer) => Buffer.from(x instanceof Buffer ? x : JSON.stringify(x)).toString('base64url');
  const me = (token: string) => api.get('/api/merchant/me', { headers: bearer(token) });

  test('a JWT signed by another key, an expired JWT and a none-algorithm JWT are refused', async () => {
    const merchant = await registerMerchant(api);
    const subject = { merchantId: merchant.merchantId, email: merchant.email, admin: true, sessionEpoch: 0 };

    const foreign = await signSessionToken(generateSigningKey(), subject, { now: new Date(), ttlSeconds: 600 });
    expectProblem(await me(foreign.token), 401, 'invalid_token');

    // The stored key is sealed with SECRETS_KEK (here the development KEK): opened as auth does.
    const [row] = await db<{ kid: string; private_key_pem: string }[]>`select kid, private_key_pem from auth.signing_keys order by created_at desc limit 1`;
    expect(row).toBeDefined();
    const box = new SecretBox(kekFromBytes(Buffer.from(DEVELOPMENT_KEK_BASE64, 'base64')));
    const realKey = signingKeyFromPem(box.decrypt(row!.private_key_pem, `signing_keys.private_key_pem:${row!.kid}`));
    const expired = await signSessionToken(realKey, subject, { now: new Date(Date.now() - 3 * 3600_000), ttlSeconds: 600 });
    expectProblem(await me(expired.token), 401, 'invalid_token');
    const valid = await signSessionToken(realKey, { ...subject, admin: false }, { now: new Date(), ttlSeconds: 600 });
    expect((await me(valid.token)).status).toBe(200);

    const claims = JSON.parse(Buffer.from(merchant.token.split('.')[1]!, 'base64url').toString());
    const none = `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims)}.`;
    expectProblem(await me(none), 401, 'invalid_token');
    const { privateKey } = generateKeyPairSync('ed25519');
    const header = JSON.parse(Buffer.from(merchant.token.split('.')[0]!, 'base64url').toString());
    const signingInput = `${b64url(header)}.${b64url({ ...claims, admin: true })}`;
    const forged = `${signingInput}.${b64url(edSign(null, Buffer.from(signingInput), privateKey))}`;
    expectProblem(await me(forged), 401, 'invalid_token');
    expectProblem(await me('not-a-jwt'), 401, 'invalid_token');
    expectProblem(await api.get('/api/merchant/me'), 401);
  });

  test('after signing-key rotation a token issued before still works, and new tokens too', async () => {
    const merchant = await registerMerchant(api);
    expect((await me(merchant.token)).status).toBe(200);
    const auth = createRpcClient(AuthService, system.processes.auth.grpcUrl!);
    const rotated = await auth.rotateSigningKey({});
    const oldKid = JSON.parse(Buffer.from(merchant.token.split('.')[0]!, 'base64url').toString()).kid;
    expect(rotated.key?.kid).toBeDefined();
    expect(rotated.key?.kid).not.toBe(oldKid);
    expect((await me(merchant.token)).status).toBe(200);
    const fresh = await api.post('/api/merchant/login', { email: merchant.email, password: merchant.password });
    const freshKid = JSON.parse(Buffer.from(fresh.body.token.split('.')[0]!, 'base64url').toString()).kid;
    expect(freshKid).toBe(rotated.key?.kid);
    expect((await me(fresh.body.token)).status).toBe(200);
  });
});

describe('projects and webhook secrets', () => {
  test('an invalid webhookUrl answers 400 naming the field', async () => {
    const merchant = await registerMerchant(api);
    for (const webhookUrl of ['ftp://example.com/hook', 'not a url', 'javascript:alert(1)', `https://example.com/${'a'.repeat(3000)}`]) {
      const res = await api.post('/api/merchant/projects', { name: 'Shop', environment: 'sandbox', webhookUrl }, { headers: bearer(merchant.token) });
      const problem = expectProblem(res, 400, 'validation_failed');
      expect(problem.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field: 'webhookUrl' })]));
    }
  });

  test('the webhook secret is shown once and can be rotated', async () => {
    const merchant = await registerMerchant(api);
    const created = await api.post('/api/merchant/projects', { name: 'Shop', environment: 'sandbox', webhookUrl: 'https://example.com/hook' }, { headers: bearer(merchant.token) });
    expect(created.status).toBe(201);
    expect(created.body.webhookSecret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    // Answers that carry a credential are never stored on the way.
    expect(created.headers.get('cache-control')).toBe('no-store');
    expect((await api.post('/api/merchant/login', { email: merchant.email, password: merchant.password })).headers.get('cache-control')).toBe('no-store');
    const key = await api.post(`/api/merchant/projects/${created.body.id}/api-keys`, { name: 'k' }, { headers: bearer(merchant.token) });
    expect(key.status).toBe(201);
    expect(key.headers.get('cache-control')).toBe('no-store');
    expect(created.body).toMatchObject({ name: 'Shop', environment: 'sandbox', webhookUrl: 'https://example.com/hook', invoiceLifetimeMinutes: 60 });
    const fetched = await api.get(`/api/merchant/projects/${created.body.id}`, { headers: bearer(merchant.token) });
    expect(fetched.status).toBe(200);
    expect(fetched.body.webhookSecret).toBeUndefined();
    expect(fetched.text).not.toContain(created.body.webhookSecret);
    const listed = await api.get('/api/merchant/projects', { headers: bearer(merchant.token) });
    expect(listed.text).not.toContain(created.body.webhookSecret);

    const rotated = await api.post(`/api/merchant/projects/${created.body.id}/webhook-secret/rotate`, undefined, { headers: bearer(merchant.token) });
    expect(rotated.status).toBe(200);
    expect(rotated.body.webhookSecret).toMatch(/^whsec_/);
    expect(rotated.body.webhookSecret).not.toBe(created.body.webhookSecret);

    const patched = await api.patch(`/api/merchant/projects/${created.body.id}`, { name: 'Renamed', webhookUrl: null, invoiceLifetimeMinutes: 30 }, { headers: bearer(merchant.token) });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'Renamed', webhookUrl: null, invoiceLifetimeMinutes: 30 });
  });
});

describe('bad input on every dashboard route', () => {
  let merchant: Awaited<ReturnType<typeof registerMerchant>>;
  let projectId: string;
  let keyId: string;
  beforeAll(async () => {
    merchant = await registerMerchant(api);
    const p = await createProjectWithKey(api, merchant, 'sandbox');
    projectId = p.id;
    keyId = p.keyId;
  });

  const routes = () => [
    { method: 'POST', path: '/api/merchant/register', auth: false },
    { method: 'POST', path: '/api/merchant/register/confirm', auth: false },
    { method: 'POST', path: '/api/merchant/login', auth: false },
    { method: 'POST', path: '/api/merchant/projects', auth: true },
    { method: 'PATCH', path: `/api/merchant/projects/${projectId}`, auth: true },
    { method: 'POST', path: `/api/merchant/projects/${projectId}/api-keys`, auth: true },
  ];

  test('wrong types, missing fields, long strings, invalid email: 400 naming the field', async () => {
    const h = bearer(merchant.token);
    const cases: Array<[string, string, unknown, string]> = [
      ['POST', '/api/merchant/register', { email: 'a@b.co', password: 12345678, name: 'x' }, 'password'],
      ['POST', '/api/merchant/register', { password: 'long-enough-pw', name: 'x' }, 'email'],
      ['POST', '/api/merchant/register', { email: 'not-an-email', password: 'long-enough-pw', name: 'x' }, 'email'],
      ['POST', '/api/merchant/register', { email: 'a@b.co', password: 'short', name: 'x' }, 'password'],
      ['POST', '/api/merchant/register', { email: 'a@b.co', password: 'long-enough-pw', name: 'x'.repeat(101) }, 'name'],
      ['POST', '/api/merchant/register', { email: 'a@b.co', password: 'long-enough-pw', name: 'x', extra: 1 }, 'extra'],
      ['POST', '/api/merchant/register/confirm', { email: 'a@b.co', code: '12345' }, 'code'],
      ['POST', '/api/merchant/register/confirm', { email: 'a@b.co', code: 123456 }, 'code'],
      ['POST', '/api/merchant/register/confirm', { code: '123456', password: 'a-long-password' }, 'email'],
      ['POST', '/api/merchant/register/confirm', { email: 'a@b.co', code: '123456' }, 'password'],
      ['POST', '/api/merchant/login', { email: ['a@b.co'], password: 'x' }, 'email'],
      ['POST', '/api/merchant/projects', { name: 'Shop', environment: 'staging' }, 'environment'],
      ['POST', '/api/merchant/projects', { environment: 'live' }, 'name'],
      ['PATCH', `/api/merchant/projects/${projectId}`, { invoiceLifetimeMinutes: 'sixty' }, 'invoiceLifetimeMinutes'],
      ['PATCH', `/api/merchant/projects/${projectId}`, { invoiceLifetimeMinutes: 0 }, 'invoiceLifetimeMinutes'],
      ['POST', `/api/merchant/projects/${projectId}/api-keys`, { name: 42 }, 'name'],
      // Bidi overrides and isolates (issue 27): "Shop\u202Etxt.exe" would display as "Shopexe.txt".
      ['POST', '/api/merchant/projects', { name: 'Shop\u202Etxt.exe', environment: 'sandbox' }, 'name'],
      ['PATCH', `/api/merchant/projects/${projectId}`, { name: 'Ac\u2067me\u2069' }, 'name'],
      ['POST', `/api/merchant/projects/${projectId}/api-keys`, { name: 'key\u202D' }, 'name'],
      ['POST', '/api/merchant/register', { email: 'bidi@b.co', password: 'long-enough-pw', name: 'Evil\u202Ba' }, 'name'],
      // A lone surrogate would reach auth as U+FFFD (silently altered): refused at the edge.
      ['POST', '/api/merchant/projects', { name: 'Shop \ud800', environment: 'sandbox' }, 'name'],
    ];
    for (const [method, p, body, field] of cases) {
      const res = await api.request(method, p, { body, headers: h });
      const problem = expectProblem(res, 400);
      expect({ route: `${method} ${p}`, fields: problem.errors?.map((e: { field: string }) => e.field) }).toEqual({
        route: `${method} ${p}`,
        fields: expect.arrayContaining([field]),
      });
    }
    expectProblem(await api.get('/api/merchant/projects/not-a-uuid', { headers: h }), 400, 'validation_failed');
    expectProblem(await api.delete(`/api/merchant/projects/${projectId}/api-keys/nope`, { headers: h }), 400, 'validation_failed');
    expect(keyId).toBeDefined();
  });

  test('non-JSON, empty and huge bodies: 415, 400 and 413 problem+json', async () => {
    const h = bearer(merchant.token);
    expectProblem(await api.request('POST', '/api/merchant/projects', { raw: 'name=x', headers: { ...h, 'content-type': 'application/x-www-form-urlencoded' } }), 415, 'unsupported_media_type');
    expectProblem(await api.request('POST', '/api/merchant/projects', { raw: '', headers: { ...h, 'content-type': 'application/json' } }), 400);
    expectProblem(await api.request('POST', '/api/merchant/projects', { raw: '{"name":', headers: { ...h, 'content-type': 'application/json' } }), 400, 'invalid_json');
    expectProblem(await api.request('POST', '/api/merchant/projects', { raw: JSON.stringify({ name: 'x'.repeat(200_000), environment: 'live' }), headers: { ...h, 'content-type': 'application/json' } }), 413, 'payload_too_large');
  });

  test('property: a few hundred random bodies per route never get a 5xx, always problem+json 4xx', async () => {
    const h = bearer(merchant.token);
    const bodies = fc.oneof(
      fc.anything({ maxDepth: 2 }),
      fc.record({ email: fc.oneof(fc.string(), fc.emailAddress(), fc.integer()), password: fc.oneof(fc.string(), fc.integer()), name: fc.oneof(fc.string(), fc.constant(null)) }, { requiredKeys: [] }),
      fc.record({ name: fc.oneof(fc.string({ maxLength: 150 }), fc.integer()), environment: fc.oneof(fc.constantFrom('live', 'sandbox'), fc.string()), webhookUrl: fc.oneof(fc.webUrl(), fc.string(), fc.constant(null)), invoiceLifetimeMinutes: fc.oneof(fc.integer(), fc.double(), fc.string()) }, { requiredKeys: [] }),
    );
    for (const route of routes()) {
      await fc.assert(
        fc.asyncProperty(bodies, async (body) => {
          const res = await api.request(route.method, route.path, { raw: JSON.stringify(body) ?? 'null', headers: { 'content-type': 'application/json', ...(route.auth ? h : {}) } });
          expect(res.status).toBeLessThan(500);
          if (res.status >= 400) expect(res.headers.get('content-type')).toContain('application/problem+json');
        }),
        { numRuns: 200 },
      );
    }
  }, 120_000);
});
