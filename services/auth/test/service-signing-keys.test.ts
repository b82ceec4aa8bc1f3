/**
 * Session signing keys through the gRPC API: one active key even when replicas start together,
 * rotation that keeps earlier tokens valid until they expire, and retired keys leaving the JWKS
 * once their tokens can no longer be valid.
 */
import { toJson } from '@bufbuild/protobuf';
import { GetJwksResponseSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { createTestDatabase, uniqueName, type TestDatabase } from '../../../test/support/infra';
import { importJwks, verifyJwt } from '@coinvoice/domain/credentials/jwt';
import { RETIRED_KEY_GRACE_SECONDS } from '../src/sessions';
import { PASSWORD, register, startAuth, type AuthClient, type StartedAuth } from './support/auth';

const SESSION_TTL_SECONDS = 3600;
let database: TestDatabase;
let replicaA: StartedAuth;
let replicaB: StartedAuth;

beforeAll(async () => {
  // Two replicas of the service started at the same moment on one fresh database.
  database = await createTestDatabase('cvauthkeys');
  const namespace = uniqueName('t');
  const env = { SESSION_TTL_SECONDS: String(SESSION_TTL_SECONDS) };
  [replicaA, replicaB] = await Promise.all([
    startAuth({ database, namespace, env }),
    startAuth({ database, namespace, env }),
  ]);
});

afterAll(async () => {
  // The shared namespace's stream is ours to remove (startAuth leaves a given namespace alone).
  const jsm = await replicaA?.nats.jetstreamManager().catch(() => undefined);
  await jsm?.streams.delete(replicaA.namespace.streamName('auth')).catch(() => undefined);
  await replicaA?.dispose();
  await replicaB?.dispose();
  await database?.drop();
});

async function jwksOf(client: AuthClient) {
  const res = await client.getJwks({});
  return { kids: res.keys.map((k) => k.kid), keys: importJwks(toJson(GetJwksResponseSchema, res)), res };
}

function kidOf(token: string): string {
  const [header = ''] = token.split('.');
  return (JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as { kid: string }).kid;
}

async function verifies(token: string, keys: ReturnType<typeof importJwks>): Promise<string> {
  const verified = await verifyJwt(token, keys, new Date());
  return verified.valid ? 'valid' : verified.reason;
}

it('creates exactly one signing key when two replicas start at once, and both publish it', async () => {
  const rows = await replicaA.db<{ kid: string; retired_at: Date | null }[]>`select kid, retired_at from signing_keys`;
  expect(rows).toHaveLength(1);
  expect(rows[0]?.retired_at).toBeNull();
  const a = await jwksOf(replicaA.client);
  const b = await jwksOf(replicaB.client);
  expect(a.kids).toEqual([rows[0]?.kid]);
  expect(b.kids).toEqual(a.kids);
  const jwk = a.res.keys[0];
  expect(jwk).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
  expect(jwk?.x).toMatch(/^[A-Za-z0-9_-]{43}$/);

  // A token from one replica verifies with the other's JWKS.
  const { token } = await register(replicaA);
  expect(await verifies(token, b.keys)).toBe('valid');
});

it('after RotateSigningKey, earlier tokens still verify and new tokens carry the new kid, on every replica', async () => {
  const { email, token: before } = await register(replicaA);
  const oldKid = kidOf(before);

  const rotated = await replicaA.client.rotateSigningKey({});
  const newKid = rotated.key!.kid;
  expect(newKid).not.toBe(oldKid);

  // The JWKS returned afterwards: current key first, the retired one still there.
  const after = await jwksOf(replicaB.client);
  expect(after.kids[0]).toBe(newKid);
  expect(after.kids).toContain(oldKid);
  expect(after.res.keys[0]).toEqual(rotated.key);
  expect(await verifies(before, after.keys)).toBe('valid');

  // New tokens, from either replica, are signed with the new key.
  const fromA = await replicaA.client.login({ email, password: PASSWORD });
  const fromB = await replicaB.client.login({ email, password: PASSWORD });
  expect(kidOf(fromA.token)).toBe(newKid);
  expect(kidOf(fromB.token)).toBe(newKid);
  expect(await verifies(fromB.token, after.keys)).toBe('valid');

  const rows = await replicaA.db<{ kid: string }[]>`select kid from signing_keys where retired_at is null`;
  expect(rows.map((r) => r.kid)).toEqual([newKid]);
});

it('drops a retired key from the JWKS (and the database) once every token it signed has expired', async () => {
  const { token: old } = await register(replicaA);
  const oldKid = kidOf(old);
  await replicaA.client.rotateSigningKey({});
  expect((await jwksOf(replicaA.client)).kids).toContain(oldKid);

  // Move the retirement back to just before the end of its tokens' lifetime: still published.
  const retention = SESSION_TTL_SECONDS + RETIRED_KEY_GRACE_SECONDS;
  await replicaA.db`update signing_keys set retired_at = now() - make_interval(secs => ${retention - 60}) where kid = ${oldKid}`;
  expect((await jwksOf(replicaA.client)).kids).toContain(oldKid);

  // And past it: gone from the JWKS, so its tokens no longer verify.
  await replicaA.db`update signing_keys set retired_at = now() - make_interval(secs => ${retention + 1}) where kid = ${oldKid}`;
  const jwks = await jwksOf(replicaB.client);
  expect(jwks.kids).not.toContain(oldKid);
  expect(await verifies(old, jwks.keys)).toBe('unknown_key');

  // The next rotation deletes the expired private key.
  await replicaB.client.rotateSigningKey({});
  const [row] = await replicaA.db`select 1 from signing_keys where kid = ${oldKid}`;
  expect(row).toBeUndefined();
});

it('keeps one active key under concurrent rotations', async () => {
  const results = await Promise.all([
    replicaA.client.rotateSigningKey({}),
    replicaB.client.rotateSigningKey({}),
    replicaA.client.rotateSigningKey({}),
  ]);
  const active = await replicaA.db<{ kid: string }[]>`select kid from signing_keys where retired_at is null`;
  expect(active).toHaveLength(1);
  expect(results.map((r) => r.key?.kid)).toContain(active[0]?.kid);
  const jwks = await jwksOf(replicaA.client);
  expect(jwks.kids[0]).toBe(active[0]?.kid);
  for (const r of results) expect(jwks.kids).toContain(r.key?.kid);
});
