/**
 * A wrong password and an unknown email must not be told apart by response time: with the real
 * (OWASP) argon2id cost, both spend one argon2id verification. Medians of interleaved rounds keep
 * scheduler noise out; without the dummy verification the unknown email answers ~20x faster.
 */
import { Code } from '@coinvoice/runtime';
import { OWASP_ARGON2ID_PARAMS } from '../src/domain/passwords';
import { PASSWORD, register, rpcError, startAuth, uniqueEmail, type StartedAuth } from './support/auth';

let auth: StartedAuth;

beforeAll(async () => {
  auth = await startAuth({ env: { PASSWORD_HASH_MEMORY_KIB: String(OWASP_ARGON2ID_PARAMS.memoryKiB) } });
});

afterAll(async () => {
  await auth?.dispose();
});

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function timedFailure(call: () => Promise<unknown>): Promise<{ ms: number; code: string }> {
  const started = performance.now();
  const err = await rpcError(call());
  const ms = performance.now() - started;
  expect(err.connectCode).toBe(Code.Unauthenticated);
  return { ms, code: err.code };
}

it('answers an unknown email and a wrong password in comparable time', async () => {
  const { email } = await register(auth);
  const client = auth.client;
  // Warm-up: first calls pay for connections and JIT.
  await timedFailure(() => client.login({ email, password: 'wrong password 0' }));
  await timedFailure(() => client.login({ email: uniqueEmail('ghost'), password: PASSWORD }));

  const wrongPassword: number[] = [];
  const unknownEmail: number[] = [];
  for (let round = 0; round < 12; round++) {
    const a = await timedFailure(() => client.login({ email, password: `wrong password ${round}` }));
    const b = await timedFailure(() => client.login({ email: uniqueEmail('ghost'), password: PASSWORD }));
    expect(a.code).toBe('invalid_credentials');
    expect(b.code).toBe('invalid_credentials');
    wrongPassword.push(a.ms);
    unknownEmail.push(b.ms);
  }
  const ratio = median(unknownEmail) / median(wrongPassword);
  // Both do one argon2id at 19 MiB (tens of ms); a lookup-only answer would take ~1 ms.
  expect(median(wrongPassword)).toBeGreaterThan(5);
  expect(ratio).toBeGreaterThan(0.6);
  expect(ratio).toBeLessThan(1.6);
});
