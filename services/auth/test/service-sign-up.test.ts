/**
 * Sign-up confirmed by the emailed code (issue 27): RegisterMerchant answers alike for a new and a
 * registered email, and ConfirmRegistration answers alike for a wrong code, an email without a
 * pending sign-up and a registered one; only the right code for a new email makes an account, once.
 * Through a real gRPC client against the auth service (real Postgres, argon2id, a notifier stand-in
 * keeping each email it was asked to send).
 */
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@coinvoice/runtime';
import { isWellFormedOneTimeCode } from '@coinvoice/domain/credentials/one-time-code';
import { EmailCodePurpose } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { EMAIL_CODE_MAX_ATTEMPTS } from '../src/handlers';
import { PASSWORD, register, rpcError, startAuth, uniqueEmail, type AuthClient, type StartedAuth } from './support/auth';

let auth: StartedAuth;
let client: AuthClient;

beforeAll(async () => {
  auth = await startAuth();
  client = auth.client;
});

afterAll(async () => {
  await auth?.dispose();
});

/** A code that is not `code` (the next one, wrapping). */
function otherThan(code: string): string {
  return String((Number(code) + 1) % 1_000_000).padStart(6, '0');
}

async function merchantCount(email: string): Promise<number> {
  const [row] = await auth.db<{ count: string }[]>`select count(*) from merchants where email = ${email}`;
  return Number(row?.count);
}

describe('RegisterMerchant tells nobody which emails exist', () => {
  it('answers a registered email exactly as a new one, the owner learns of the attempt by email, the new address gets a code', async () => {
    const owner = await register(auth, { email: uniqueEmail('owner') });
    const newcomer = uniqueEmail('newcomer');
    const attemptsBefore = auth.notifier.signUpAttemptEmails.length;

    const taken = await client.registerMerchant({ email: owner.email.toUpperCase(), password: 'the attacker password', name: 'Copy' });
    const fresh = await client.registerMerchant({ email: newcomer, password: 'the attacker password', name: 'Copy' });

    // The same fields, no account, no token; only the email (as sent) differs.
    expect(Object.keys(taken).sort()).toEqual(Object.keys(fresh).sort());
    expect(taken).not.toHaveProperty('token');
    expect(taken).not.toHaveProperty('merchant');
    expect(taken.email).toBe(owner.email);
    expect(fresh.email).toBe(newcomer);
    const ttl = (r: typeof taken) => timestampDate(r.codeExpiresAt!).getTime() - Date.now();
    expect(Math.abs(ttl(taken) - ttl(fresh))).toBeLessThan(5_000);

    // The owner is told someone tried (no code); the newcomer gets a sign-up code.
    expect(auth.notifier.signUpAttemptEmails.slice(attemptsBefore)).toEqual([expect.objectContaining({ email: owner.email })]);
    expect(auth.notifier.signUpCodes(owner.email)).toHaveLength(1); // the owner's own sign-up, nothing since
    expect(auth.notifier.signUpCodes(newcomer)).toHaveLength(1);
    const sent = auth.notifier.verificationEmails.filter((e) => e.email === newcomer);
    expect(sent).toEqual([expect.objectContaining({ purpose: EmailCodePurpose.SIGN_UP })]);
    expect(isWellFormedOneTimeCode(sent[0]!.code)).toBe(true);

    // The registered account is untouched: its password still logs in, the attacker's does not.
    await client.login({ email: owner.email, password: PASSWORD });
    expect((await rpcError(client.login({ email: owner.email, password: 'the attacker password' }))).code).toBe('invalid_credentials');
    expect(await merchantCount(owner.email)).toBe(1);
    expect(await merchantCount(newcomer)).toBe(0);
  });

  it('spends the same argon2id work on a registered email as on a new one', async () => {
    // The OWASP cost, so the hash dominates: a registered email answering without hashing would be
    // many times faster.
    const timed = await startAuth({ env: { PASSWORD_HASH_MEMORY_KIB: String(19 * 1024) } });
    try {
      const { email: taken } = await register(timed, { email: uniqueEmail('timed-owner') });
      // Interleaved (taken, new, taken, new…): a busy machine slows both alike, never one set.
      const timeOf = async (email: string) => {
        const start = performance.now();
        const answer = await timed.client.registerMerchant({ email, password: PASSWORD, name: 'T' });
        expect(answer.email).toBe(email);
        return performance.now() - start;
      };
      await timeOf(uniqueEmail('warm-up'));
      const takenTimes: number[] = [];
      const newTimes: number[] = [];
      for (let i = 0; i < 9; i++) {
        takenTimes.push(await timeOf(taken));
        newTimes.push(await timeOf(uniqueEmail('timed-new')));
      }
      const median = (times: number[]) => times.sort((a, b) => a - b)[4]!;
      const takenMs = median(takenTimes);
      const newMs = median(newTimes);
      expect(takenMs / newMs).toBeGreaterThan(0.5);
      expect(takenMs / newMs).toBeLessThan(2);
    } finally {
      await timed.dispose();
    }
  });

  it('a second registration of a pending email replaces its code: the first stops working', async () => {
    const email = uniqueEmail('again');
    await client.registerMerchant({ email, password: PASSWORD, name: 'First' });
    await client.registerMerchant({ email, password: PASSWORD, name: 'Second' });
    const [first, second] = auth.notifier.signUpCodes(email);
    expect(second).toBeDefined();
    if (first !== second) {
      expect(await rpcError(client.confirmRegistration({ email, code: first!, password: PASSWORD }))).toMatchObject({ code: 'invalid_verification_code' });
    }
    const created = await client.confirmRegistration({ email, code: second!, password: PASSWORD });
    expect(created.merchant).toMatchObject({ email, name: 'Second', emailVerified: true });
  });
});

describe('ConfirmRegistration', () => {
  it('creates the account, email verified, signed in, able to log in; the pending sign-up is gone', async () => {
    const email = uniqueEmail('confirm');
    await client.registerMerchant({ email, password: PASSWORD, name: 'Confirmed Ltd' });
    expect(await merchantCount(email)).toBe(0);
    const created = await client.confirmRegistration({ email, code: auth.notifier.signUpCodes(email).at(-1)!, password: PASSWORD });
    expect(created.merchant).toMatchObject({ email, name: 'Confirmed Ltd', emailVerified: true, isAdmin: false });
    expect(created.token).not.toBe('');
    expect((await client.getMerchant({ merchantId: created.merchant!.id })).merchant?.emailVerified).toBe(true);
    expect((await client.login({ email, password: PASSWORD })).token).not.toBe('');
    expect(await auth.db`select 1 from pending_sign_ups where email = ${email}`).toHaveLength(0);
  });

  it('a stranger who registers a pending email again cannot give the account his password (pre-account hijacking)', async () => {
    const email = uniqueEmail('hijack');
    await client.registerMerchant({ email, password: PASSWORD, name: 'Owner' });
    await client.registerMerchant({ email, password: 'the stranger password', name: 'Stranger' });
    // The latest code reaches the owner only; entered with the owner's password it is refused.
    const latest = auth.notifier.signUpCodes(email).at(-1)!;
    expect(await rpcError(client.confirmRegistration({ email, code: latest, password: PASSWORD }))).toMatchObject({ code: 'invalid_verification_code' });
    expect(await merchantCount(email)).toBe(0);
    // The owner registers again (the sign-up page's "Send a new code") and gets the account.
    await client.registerMerchant({ email, password: PASSWORD, name: 'Owner' });
    await client.confirmRegistration({ email, code: auth.notifier.signUpCodes(email).at(-1)!, password: PASSWORD });
    await client.login({ email, password: PASSWORD });
    expect((await rpcError(client.login({ email, password: 'the stranger password' }))).code).toBe('invalid_credentials');
  });

  it('answers a wrong code, an unknown email and a registered email identically', async () => {
    const pendingEmail = uniqueEmail('pending');
    await client.registerMerchant({ email: pendingEmail, password: PASSWORD, name: 'P' });
    const code = auth.notifier.signUpCodes(pendingEmail).at(-1)!;
    const owner = await register(auth, { email: uniqueEmail('registered') });
    // An attacker registers the owner's email (the owner is told) and tries codes on it.
    await client.registerMerchant({ email: owner.email, password: 'attacker-password', name: 'X' });

    const wrongCode = await rpcError(client.confirmRegistration({ email: pendingEmail, code: otherThan(code), password: PASSWORD }));
    const unknownEmail = await rpcError(client.confirmRegistration({ email: uniqueEmail('nobody'), code, password: PASSWORD }));
    const registered = await rpcError(client.confirmRegistration({ email: owner.email, code, password: PASSWORD }));
    const registeredNeverAttempted = await rpcError(client.confirmRegistration({ email: (await register(auth)).email, code, password: PASSWORD }));
    expect(wrongCode).toEqual({
      connectCode: Code.InvalidArgument,
      code: 'invalid_verification_code',
      message: 'the verification code or the password is wrong',
      violations: [{ field: 'code', message: 'is wrong, or the password is not the one registered with' }],
    });
    expect(unknownEmail).toEqual(wrongCode);
    expect(registered).toEqual(wrongCode);
    expect(registeredNeverAttempted).toEqual(wrongCode);
    expect(await merchantCount(owner.email)).toBe(1);
  });

  it('two simultaneous confirmations of one sign-up create one account; the other answers invalid_verification_code', async () => {
    const email = uniqueEmail('race');
    await client.registerMerchant({ email, password: PASSWORD, name: 'Race' });
    const code = auth.notifier.signUpCodes(email).at(-1)!;
    const results = await Promise.allSettled(Array.from({ length: 4 }, () => client.confirmRegistration({ email, code, password: PASSWORD })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const result of results) {
      if (result.status === 'rejected') expect(await rpcError(Promise.reject(result.reason))).toMatchObject({ code: 'invalid_verification_code' });
    }
    expect(await merchantCount(email)).toBe(1);
  });

  it(`allows ${EMAIL_CODE_MAX_ATTEMPTS} wrong codes per sign-up; then even the right code is refused (expired) and no account exists`, async () => {
    const email = uniqueEmail('attempts');
    await client.registerMerchant({ email, password: PASSWORD, name: 'A' });
    const code = auth.notifier.signUpCodes(email).at(-1)!;
    for (let i = 0; i < EMAIL_CODE_MAX_ATTEMPTS; i++) {
      expect(await rpcError(client.confirmRegistration({ email, code: otherThan(code), password: PASSWORD }))).toMatchObject({ code: 'invalid_verification_code' });
    }
    expect(await rpcError(client.confirmRegistration({ email, code, password: PASSWORD }))).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'verification_code_expired' });
    expect(await merchantCount(email)).toBe(0);
    // Registering again issues a new code that works.
    await client.registerMerchant({ email, password: PASSWORD, name: 'A' });
    await client.confirmRegistration({ email, code: auth.notifier.signUpCodes(email).at(-1)!, password: PASSWORD });
    expect(await merchantCount(email)).toBe(1);
  });

  it('answers verification_code_expired for a code past its lifetime, for a new and a registered email alike', async () => {
    const email = uniqueEmail('late');
    const owner = await register(auth, { email: uniqueEmail('late-owner') });
    for (const target of [email, owner.email]) await client.registerMerchant({ email: target, password: PASSWORD, name: 'L' });
    await auth.db`update pending_sign_ups set code_expires_at = now() - interval '1 second' where email in ${auth.db([email, owner.email])}`;
    const late = await rpcError(client.confirmRegistration({ email, code: auth.notifier.signUpCodes(email).at(-1)!, password: PASSWORD }));
    expect(late).toMatchObject({ code: 'verification_code_expired' });
    expect(await rpcError(client.confirmRegistration({ email: owner.email, code: '000000', password: PASSWORD }))).toEqual(late);
    expect(await merchantCount(email)).toBe(0);
  });

  it('a malformed code costs no attempt', async () => {
    const email = uniqueEmail('malformed');
    await client.registerMerchant({ email, password: PASSWORD, name: 'M' });
    expect(await rpcError(client.confirmRegistration({ email, code: '12a456', password: PASSWORD }))).toMatchObject({ code: 'validation_failed' });
    const [row] = await auth.db<{ attempts_left: number }[]>`select attempts_left from pending_sign_ups where email = ${email}`;
    expect(row?.attempts_left).toBe(EMAIL_CODE_MAX_ATTEMPTS);
  });
});

describe('a notifier that cannot send', () => {
  it('answers service_unavailable alike for a new and a registered email, and creates no account', async () => {
    const owner = await register(auth, { email: uniqueEmail('down-owner') });
    auth.notifier.down = true;
    try {
      const fresh = uniqueEmail('down-new');
      const newErr = await rpcError(client.registerMerchant({ email: fresh, password: PASSWORD, name: 'D' }));
      const takenErr = await rpcError(client.registerMerchant({ email: owner.email, password: PASSWORD, name: 'D' }));
      expect(newErr).toMatchObject({ connectCode: Code.Unavailable, code: 'service_unavailable' });
      expect(takenErr).toEqual(newErr);
      expect(await merchantCount(fresh)).toBe(0);
    } finally {
      auth.notifier.down = false;
    }
  });
});
