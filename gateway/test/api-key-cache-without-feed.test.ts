/**
 * While the revocation feed is down (NATS away, or not reached since the start) an API key's
 * verification is kept for a second only (docs/architecture.md#starting-while-nats-is-down): a key
 * revoked meanwhile stops working within it, as it does through the feed. With the feed, the cache
 * keeps it for its TTL and a revocation drops it.
 */
import { create } from '@bufbuild/protobuf';
import { generateApiKey } from '@coinvoice/domain/credentials/api-keys';
import { VerifyApiKeyResponseSchema, type AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import { ApiKeyVerifier } from '../src/auth/api-keys';

/** auth's VerifyApiKey, counting its calls; a revoked key is Unauthenticated. */
function countingAuth(): { client: Client<typeof AuthService>; calls: () => number; revoke: () => void } {
  let calls = 0;
  let revoked = false;
  const stub: Pick<Client<typeof AuthService>, 'verifyApiKey'> = {
    verifyApiKey: async () => {
      calls++;
      if (revoked) throw new ConnectError('revoked', Code.Unauthenticated);
      return create(VerifyApiKeyResponseSchema, {
        keyId: '0b0b0b0b-0000-4000-8000-000000000001',
        projectId: '0b0b0b0b-0000-4000-8000-000000000002',
        projectName: 'Shop',
        environment: Environment.LIVE,
        merchantId: '0b0b0b0b-0000-4000-8000-000000000003',
        invoiceLifetimeMinutes: 60,
      });
    },
  };
  return { client: stub as Client<typeof AuthService>, calls: () => calls, revoke: () => (revoked = true) };
}

const key = generateApiKey('live');

test('with the feed: verified once, kept for the TTL', async () => {
  let now = 1_000_000;
  const auth = countingAuth();
  const verifier = new ApiKeyVerifier(auth.client, { ttlMs: 30_000, now: () => now });
  await verifier.verify(key);
  now += 20_000;
  await verifier.verify(key);
  expect(auth.calls()).toBe(1);
});

test('without the feed: kept for a second only, so a key revoked meanwhile is refused within it; the feed back, the TTL again', async () => {
  let now = 1_000_000;
  const auth = countingAuth();
  const verifier = new ApiKeyVerifier(auth.client, { ttlMs: 30_000, now: () => now });
  verifier.setFeedLive(false);
  await verifier.verify(key);
  now += 500;
  await verifier.verify(key);
  expect(auth.calls()).toBe(1);
  // Revoked while no revocation can arrive: a second later auth is asked again, and refuses.
  auth.revoke();
  now += 600;
  await expect(verifier.verify(key)).rejects.toMatchObject({ status: 401, code: 'invalid_api_key' });
  expect(auth.calls()).toBe(2);

  const fresh = countingAuth();
  const withFeed = new ApiKeyVerifier(fresh.client, { ttlMs: 30_000, now: () => now });
  withFeed.setFeedLive(false);
  withFeed.setFeedLive(true);
  await withFeed.verify(key);
  now += 20_000;
  await withFeed.verify(key);
  expect(fresh.calls()).toBe(1);
});
