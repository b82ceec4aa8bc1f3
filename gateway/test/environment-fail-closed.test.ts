/**
 * One environment mapping, and it fails closed (docs/accounting.md): an API key whose project's
 * environment auth answers as UNSPECIFIED (or a value this code does not know) is refused — never
 * taken for live, as the gateway once did for anything that was not SANDBOX.
 */
import { create } from '@bufbuild/protobuf';
import { generateApiKey } from '@coinvoice/domain/credentials/api-keys';
import { environmentFromProto, environmentToProto, requireEnvironment, UnknownEnvironmentError } from '@coinvoice/domain/environment';
import { VerifyApiKeyResponseSchema, type AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import type { Client } from '@connectrpc/connect';
import { ApiKeyVerifier } from '../src/auth/api-keys';
import { environmentName } from '../src/json';
import { HttpProblem } from '../src/problem';

/** auth's VerifyApiKey answering a valid key with the given environment. */
function authAnswering(environment: Environment): Client<typeof AuthService> {
  const stub: Pick<Client<typeof AuthService>, 'verifyApiKey'> = {
    verifyApiKey: async () =>
      create(VerifyApiKeyResponseSchema, {
        keyId: '0b0b0b0b-0000-4000-8000-000000000001',
        projectId: '0b0b0b0b-0000-4000-8000-000000000002',
        projectName: 'Shop',
        environment,
        merchantId: '0b0b0b0b-0000-4000-8000-000000000003',
        invoiceLifetimeMinutes: 60,
      }),
  };
  return stub as Client<typeof AuthService>;
}

const liveKey = generateApiKey('live');

test.each([
  ['UNSPECIFIED', Environment.UNSPECIFIED],
  ['an unknown value', 7 as Environment],
])('an API key whose environment is %s is refused: 401 invalid_api_key, never live', async (_name, environment) => {
  const verifier = new ApiKeyVerifier(authAnswering(environment), { ttlMs: 60_000 });
  const refusal = await verifier.verify(liveKey).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(refusal).toBeInstanceOf(HttpProblem);
  expect(refusal).toMatchObject({ status: 401, code: 'invalid_api_key' });
});

test('a live or sandbox key is taken as what auth says', async () => {
  expect((await new ApiKeyVerifier(authAnswering(Environment.LIVE), { ttlMs: 60_000 }).verify(liveKey)).environment).toBe('live');
  expect((await new ApiKeyVerifier(authAnswering(Environment.SANDBOX), { ttlMs: 60_000 }).verify(liveKey)).environment).toBe('sandbox');
});

test('the one mapping: both directions, unknown values undefined or an error, never a default', () => {
  expect(environmentFromProto(Environment.LIVE)).toBe('live');
  expect(environmentFromProto(Environment.SANDBOX)).toBe('sandbox');
  expect(environmentFromProto(Environment.UNSPECIFIED)).toBeUndefined();
  expect(environmentFromProto(42 as Environment)).toBeUndefined();
  expect(environmentToProto('live')).toBe(Environment.LIVE);
  expect(environmentToProto('sandbox')).toBe(Environment.SANDBOX);
  expect(() => environmentToProto('production' as never)).toThrow(/unknown environment/);
  expect(() => requireEnvironment(Environment.UNSPECIFIED, 'a test')).toThrow(UnknownEnvironmentError);
  expect(() => environmentName(Environment.UNSPECIFIED)).toThrow(UnknownEnvironmentError);
});
