/**
 * Merchants and sessions through a real gRPC client against the auth service (real Postgres and
 * NATS): sign-up, login, GetMerchant, the admin claim, input validation.
 */
import { toJson } from '@bufbuild/protobuf';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { Code, createLogger, loadServiceConfig } from '@coinvoice/runtime';
import { GetJwksResponseSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { importJwks, verifyJwt, type SessionClaims } from '@coinvoice/domain/credentials/jwt';
import { changeOperator } from '../src/operators/commands';
import { authService } from '../src/server';
import { PASSWORD, register, rpcError, startAuth, uniqueEmail, type AuthClient, type StartedAuth } from './support/auth';

const SESSION_TTL_SECONDS = 7200;
let auth: StartedAuth;
let client: AuthClient;

beforeAll(async () => {
  auth = await startAuth({
    env: { SESSION_TTL_SECONDS: String(SESSION_TTL_SECONDS) },
  });
  client = auth.client;
});

afterAll(async () => {
  await auth?.dispose();
});

async function verifiedClaims(token: string): Promise<SessionClaims> {
  const jwks = importJwks(toJson(GetJwksResponseSchema, await client.getJwks({})));
  const verified = await verifyJwt(token, jwks, new Date());
  if (!verified.valid) throw new Error(`token refused: ${verified.reason}`);
  return verified.claims;
}

describe('RegisterMerchant + ConfirmRegistration, Login, GetMerchant (the sign-up rules: service-sign-up.test.ts)', () => {
  it('signs up, logs in with the email in any case and returns the merchant', async () => {
    const email = uniqueEmail('Jane.Doe').replace('example.com', 'Example.COM');
    const before = Date.now();
    const started = await client.registerMerchant({ email: `  ${email} `, password: PASSWORD, name: '  Jane Doe  ' });
    expect(started.email).toBe(email.toLowerCase());
    const code = auth.notifier.signUpCodes(email.toLowerCase()).at(-1)!;
    const registered = await client.confirmRegistration({ email: email.toUpperCase(), code, password: PASSWORD });

    const merchant = registered.merchant!;
    expect(merchant.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(merchant.email).toBe(email.toLowerCase());
    expect(merchant.name).toBe('Jane Doe');
    expect(merchant.isAdmin).toBe(false);
    expect(merchant.emailVerified).toBe(true);
    expect(timestampDate(merchant.createdAt!).getTime()).toBeGreaterThan(before - 5_000);

    const claims = await verifiedClaims(registered.token);
    expect(claims).toMatchObject({ sub: merchant.id, email: email.toLowerCase() });
    expect(claims.admin).toBeUndefined();
    expect(claims.exp - claims.iat).toBe(SESSION_TTL_SECONDS);
    expect(timestampDate(registered.expiresAt!).getTime()).toBe(claims.exp * 1000);

    const login = await client.login({ email: email.toUpperCase(), password: PASSWORD });
    const loginClaims = await verifiedClaims(login.token);
    expect(loginClaims.sub).toBe(merchant.id);
    expect(timestampDate(login.expiresAt!).getTime()).toBe(loginClaims.exp * 1000);

    const me = await client.getMerchant({ merchantId: merchant.id });
    expect(me.merchant).toEqual(merchant);
  });

  it('answers a wrong password and an unknown email with the same error', async () => {
    const { email } = await register(auth);
    const wrongPassword = await rpcError(client.login({ email, password: 'not the password' }));
    const unknownEmail = await rpcError(client.login({ email: uniqueEmail('nobody'), password: PASSWORD }));
    expect(wrongPassword).toEqual({
      connectCode: Code.Unauthenticated,
      code: 'invalid_credentials',
      message: 'the email or password is wrong',
      violations: [],
    });
    expect(unknownEmail).toEqual(wrongPassword);
  });

  it('answers not_found for an unknown or malformed merchant id', async () => {
    for (const merchantId of ['3f8e2a4c-0b1d-4c5e-9f6a-7b8c9d0e1f2a', 'not-a-uuid', '', "1' or '1'='1"]) {
      expect(await rpcError(client.getMerchant({ merchantId }))).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
    }
  });

  it('stores an argon2id hash, never the password, and upgrades it at login when the cost setting changed', async () => {
    const { merchant, email } = await register(auth);
    const [stored] = await auth.db<{ password_hash: string }[]>`select password_hash from merchants where id = ${merchant.id}`;
    expect(stored?.password_hash).toMatch(/^\$argon2id\$v=19\$m=1024,t=2,p=1\$/);
    expect(stored?.password_hash).not.toContain(PASSWORD);

    // A second replica with a higher memory cost, on the same database: its login re-hashes.
    const stronger = await startAuth({
      database: auth.svc.database,
      namespace: auth.svc.namespace,
      env: { PASSWORD_HASH_MEMORY_KIB: '2048' },
    });
    try {
      await stronger.client.login({ email, password: PASSWORD });
      const [upgraded] = await auth.db<{ password_hash: string }[]>`select password_hash from merchants where id = ${merchant.id}`;
      expect(upgraded?.password_hash).toMatch(/^\$argon2id\$v=19\$m=2048,t=2,p=1\$/);
      // Both the old and the new replica still log the merchant in.
      await client.login({ email, password: PASSWORD });
      await expect(client.login({ email, password: 'wrong password!' })).rejects.toThrow();
    } finally {
      await stronger.dispose();
    }
  });
});

describe('operators: granted by command only', () => {
  it('no email makes an operator at registration; grant-operator does (audit-logged, sessions ended); revoke-operator undoes it', async () => {
    const { merchant, token } = await register(auth, { email: 'OPS@example.com' });
    expect(merchant.isAdmin).toBe(false);
    expect((await verifiedClaims(token)).admin).toBeUndefined();

    const logger = createLogger({ service: 'auth', level: 'silent' });
    expect(await changeOperator(auth.db, { action: 'grant', email: 'nobody@example.com', actor: 'test' }, logger)).toMatchObject({ ok: false });
    expect(await changeOperator(auth.db, { action: 'grant', email: ' Ops@EXAMPLE.com ', actor: 'test' }, logger)).toEqual({ ok: true, merchantId: merchant.id, changed: true });
    expect((await client.getMerchant({ merchantId: merchant.id })).merchant?.isAdmin).toBe(true);
    const login = await client.login({ email: 'ops@example.com', password: PASSWORD });
    const claims = await verifiedClaims(login.token);
    expect(claims).toMatchObject({ admin: true, sv: 1 });
    expect(await client.verifyOperatorToken({ token: login.token })).toMatchObject({ merchantId: merchant.id });
    // The token from before the grant is revoked (its epoch is older).
    expect((await rpcError(client.verifyOperatorToken({ token }))).code).toBe('invalid_token');

    expect(await changeOperator(auth.db, { action: 'revoke', email: 'ops@example.com', actor: 'test' }, logger)).toMatchObject({ ok: true, changed: true });
    expect((await rpcError(client.verifyOperatorToken({ token: login.token }))).code).toBe('invalid_token');
    const after = await client.login({ email: 'ops@example.com', password: PASSWORD });
    expect((await rpcError(client.verifyOperatorToken({ token: after.token }))).code).toBe('forbidden');
    const audit = await auth.db<{ action: string; actor: string }[]>`select action, actor from operator_audit where merchant_id = ${merchant.id} order by id`;
    expect(audit.map((r) => ({ ...r }))).toEqual([{ action: 'grant', actor: 'test' }, { action: 'revoke', actor: 'test' }]);
  });

  it('grant-operator refuses an account whose email is not verified: no operator, no audit row, sessions untouched', async () => {
    const { merchant, token } = await register(auth, { email: 'unverified-ops@example.com' });
    // Signing up verifies the email; accounts from before that (and the launcher's local developer) may not be.
    await auth.db`update merchants set email_verified_at = null where id = ${merchant.id}`;
    const logger = createLogger({ service: 'auth', level: 'silent' });
    const refused = await changeOperator(auth.db, { action: 'grant', email: 'unverified-ops@example.com', actor: 'ops-job' }, logger);
    expect(refused).toEqual({ ok: false, reason: expect.stringContaining('unverified-ops@example.com has not verified its email address') });
    expect((await client.getMerchant({ merchantId: merchant.id })).merchant?.isAdmin).toBe(false);
    expect(await auth.db`select 1 from operator_audit where merchant_id = ${merchant.id}`).toHaveLength(0);
    expect((await rpcError(client.verifyOperatorToken({ token }))).code).toBe('forbidden');

    // Once verified, the same command grants, audited with who ran it, when and whom.
    await auth.db`update merchants set email_verified_at = now() where id = ${merchant.id}`;
    const before = new Date();
    expect(await changeOperator(auth.db, { action: 'grant', email: 'unverified-ops@example.com', actor: 'ops-job' }, logger)).toMatchObject({ ok: true, changed: true });
    const [audit] = await auth.db<{ merchant_id: string; email: string; action: string; actor: string; at: Date }[]>`
      select merchant_id, email, action, actor, at from operator_audit where merchant_id = ${merchant.id}`;
    expect(audit).toMatchObject({ merchant_id: merchant.id, email: 'unverified-ops@example.com', action: 'grant', actor: 'ops-job' });
    expect(audit!.at.getTime()).toBeGreaterThanOrEqual(before.getTime() - 1000);
    // Revoking never needs a verified email.
    await auth.db`update merchants set email_verified_at = null where id = ${merchant.id}`;
    expect(await changeOperator(auth.db, { action: 'revoke', email: 'unverified-ops@example.com', actor: 'ops-job' }, logger)).toMatchObject({ ok: true, changed: true });
  });

  it('validates its settings at start, naming the variable', () => {
    const config = loadServiceConfig(authService, {});
    expect('ADMIN_EMAILS' in config).toBe(false);
    expect(config.SESSION_TTL_SECONDS).toBe(12 * 60 * 60);
    expect(config.PASSWORD_HASH_MEMORY_KIB).toBe(19 * 1024);
    expect(() => loadServiceConfig(authService, { PASSWORD_HASH_MEMORY_KIB: '512' })).toThrow(/PASSWORD_HASH_MEMORY_KIB/);
    expect(() => loadServiceConfig(authService, { SESSION_TTL_SECONDS: '0' })).toThrow(/SESSION_TTL_SECONDS/);
  });
});

describe('bad input answers InvalidArgument (validation_failed) naming the fields', () => {
  const long = (n: number) => 'x'.repeat(n);

  it.each([
    ['every field missing', {}, ['email', 'password', 'name']],
    ['an invalid email', { email: 'not-an-email', password: PASSWORD, name: 'A' }, ['email']],
    ['an email without a domain dot', { email: 'a@localhost', password: PASSWORD, name: 'A' }, ['email']],
    ['an oversized email', { email: `${long(250)}@example.com`, password: PASSWORD, name: 'A' }, ['email']],
    ['a short password', { email: uniqueEmail(), password: 'short', name: 'A' }, ['password']],
    ['an oversized password', { email: uniqueEmail(), password: long(129), name: 'A' }, ['password']],
    ['a blank name', { email: uniqueEmail(), password: PASSWORD, name: '   ' }, ['name']],
    ['an oversized name', { email: uniqueEmail(), password: PASSWORD, name: long(101) }, ['name']],
    ['a name with control characters', { email: uniqueEmail(), password: PASSWORD, name: 'a\u0000b' }, ['name']],
  ])('RegisterMerchant with %s', async (_label, request, fields) => {
    const err = await rpcError(client.registerMerchant(request));
    expect(err.connectCode).toBe(Code.InvalidArgument);
    expect(err.code).toBe('validation_failed');
    expect(err.violations.map((v) => v.field)).toEqual(fields);
    for (const violation of err.violations) expect(violation.message).not.toBe('');
  });

  it.each([
    ['every field missing', {}, ['email', 'code', 'password']],
    ['an invalid email', { email: 'nope', code: '123456', password: PASSWORD }, ['email']],
    ['a code of 5 digits', { email: uniqueEmail(), code: '12345', password: PASSWORD }, ['code']],
    ['a code with letters', { email: uniqueEmail(), code: '12345a', password: PASSWORD }, ['code']],
    ['an oversized password', { email: uniqueEmail(), code: '123456', password: 'x'.repeat(10_000) }, ['password']],
  ])('ConfirmRegistration with %s', async (_label, request, fields) => {
    const err = await rpcError(client.confirmRegistration(request));
    expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
    expect(err.violations.map((v) => v.field)).toEqual(fields);
  });

  it.each([
    ['every field missing', {}, ['email', 'password']],
    ['an invalid email', { email: 'nope', password: PASSWORD }, ['email']],
    ['an oversized password', { email: uniqueEmail(), password: long(10_000) }, ['password']],
  ])('Login with %s', async (_label, request, fields) => {
    const err = await rpcError(client.login(request));
    expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
    expect(err.violations.map((v) => v.field)).toEqual(fields);
  });
});
