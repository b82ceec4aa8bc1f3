/**
 * A revocation feed that stalls without a disconnect (a hung NATS server, auth's own link to it
 * lost) must not keep an ended session usable for minutes: while the feed is live, revocations are
 * still read again from auth once the last read is 30 s old (docs/architecture.md#starting-while-nats-is-down).
 */
import { create } from '@bufbuild/protobuf';
import { generateSigningKey, publicJwkOf, signSessionToken } from '@coinvoice/domain/credentials/jwt';
import { GetJwksResponseSchema, ListSessionRevocationsResponseSchema, type AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import { SessionVerifier } from '../src/auth/sessions';

const key = generateSigningKey();
const merchantId = '0b0b0b0b-0000-4000-8000-000000000009';

/** auth's JWKS and revocation list; `epoch` is the merchant's (a logout raises it), `down` makes it fail. */
function stubAuth() {
  const state = { epoch: 0, calls: 0, down: false };
  const stub: Pick<Client<typeof AuthService>, 'getJwks' | 'listSessionRevocations'> = {
    getJwks: async () => create(GetJwksResponseSchema, { keys: [publicJwkOf(key)] }),
    listSessionRevocations: async () => {
      state.calls++;
      if (state.down) throw new ConnectError('auth down', Code.Unavailable);
      return create(ListSessionRevocationsResponseSchema, { revocations: state.epoch > 0 ? [{ merchantId, minSessionEpoch: state.epoch }] : [] });
    },
  };
  return { client: stub as Client<typeof AuthService>, state };
}

test('the feed live but silent: a logout is seen once the last read from auth is 30 s old; one read per interval, shared', async () => {
  let now = 1_000_000;
  const auth = stubAuth();
  const sessions = new SessionVerifier(auth.client, { clock: () => now });
  const { token } = await signSessionToken(key, { merchantId, email: 'm@example.com', admin: false, sessionEpoch: 0 }, { now: new Date(), ttlSeconds: 3600 });
  const bearer = `Bearer ${token}`;
  await expect(sessions.verify(bearer)).resolves.toMatchObject({ merchantId });
  // The merchant logs out; the event never comes (the feed stalled without a disconnect).
  auth.state.epoch = 1;
  now += 29_000;
  await expect(sessions.verify(bearer)).resolves.toMatchObject({ merchantId });
  expect(auth.state.calls).toBe(1);
  now += 1_000;
  const answers = await Promise.allSettled([sessions.verify(bearer), sessions.verify(bearer), sessions.verify(bearer)]);
  expect(answers.map((a) => a.status)).toEqual(['rejected', 'rejected', 'rejected']);
  expect(auth.state.calls).toBe(2);
});

test('auth down while the feed is live: sessions keep working on what is known, and the next interval asks again', async () => {
  let now = 5_000_000;
  const auth = stubAuth();
  const sessions = new SessionVerifier(auth.client, { clock: () => now });
  const { token } = await signSessionToken(key, { merchantId, email: 'm@example.com', admin: false, sessionEpoch: 0 }, { now: new Date(), ttlSeconds: 3600 });
  await sessions.verify(`Bearer ${token}`);
  auth.state.down = true;
  now += 30_000;
  await expect(sessions.verify(`Bearer ${token}`)).resolves.toMatchObject({ merchantId });
  await expect(sessions.verify(`Bearer ${token}`)).resolves.toMatchObject({ merchantId });
  expect(auth.state.calls).toBe(2);
  auth.state.down = false;
  auth.state.epoch = 1;
  now += 30_000;
  await expect(sessions.verify(`Bearer ${token}`)).rejects.toMatchObject({ code: 'invalid_token' });
});
