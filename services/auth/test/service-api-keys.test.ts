/**
 * API keys through the gRPC API: creation per environment, verification, lazy last-used
 * bookkeeping, revocation with its auth.api_key_revoked event on JetStream, and malformed keys
 * refused without touching the database (counted through the service's own pool).
 */
import { createHash } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, toBinary, toJson, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { Code, MSG_ID_HEADER } from '@coinvoice/runtime';
import { createRpcClient, ServingStatus } from '@coinvoice/runtime';
import {
  GetProjectContextRequestSchema,
  GetProjectContextResponseSchema,
  ListApiKeysResponseSchema,
  VerifyApiKeyRequestSchema,
  VerifyApiKeyResponseSchema,
} from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Health } from '@coinvoice/runtime/gen/grpc/health/v1/health_pb';
import { ApiKeyRevokedSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/events_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { BASE62_ALPHABET, buildApiKey, parseApiKey, randomBase62, API_KEY_RANDOM_LENGTH } from '@coinvoice/domain/credentials/api-keys';
import { authService } from '../src/server';
import {
  aboutKey,
  decodeEvent,
  instrumented,
  QueryCounter,
  register,
  rpcError,
  sleep,
  startAuth,
  SubjectWatcher,
  type AuthClient,
  type StartedAuth,
} from './support/auth';

const queries = new QueryCounter();
let auth: StartedAuth;
let client: AuthClient;
let merchantId: string;
let sandboxProject: string;
let liveProject: string;

beforeAll(async () => {
  auth = await startAuth({ definition: instrumented(authService, { queries }) });
  client = auth.client;
  merchantId = (await register(auth)).merchant.id;
  sandboxProject = (await client.createProject({ merchantId, name: 'Sandbox', environment: Environment.SANDBOX })).project!.id;
  liveProject = (await client.createProject({ merchantId, name: 'Live', environment: Environment.LIVE })).project!.id;
});

afterAll(async () => {
  await auth?.dispose();
});

async function createKey(projectId: string, name = 'server') {
  const res = await client.createApiKey({ merchantId, projectId, name });
  return { apiKey: res.apiKey!, key: res.key };
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('CreateApiKey and VerifyApiKey', () => {
  it('issues SBX_ keys for sandbox projects and LIVE_ keys for live ones, each verifying to its project', async () => {
    const sandbox = await createKey(sandboxProject, ' CI runner ');
    expect(sandbox.key).toMatch(/^SBX_[0-9A-Za-z]{40}$/);
    expect(parseApiKey(sandbox.key)).toEqual({ wellFormed: true, environment: 'sandbox' });
    expect(sandbox.apiKey).toMatchObject({ projectId: sandboxProject, name: 'CI runner', prefix: sandbox.key.slice(0, 12) });
    expect(sandbox.apiKey.revokedAt).toBeUndefined();
    expect(sandbox.apiKey.lastUsedAt).toBeUndefined();

    const live = await createKey(liveProject);
    expect(live.key).toMatch(/^LIVE_[0-9A-Za-z]{40}$/);
    expect(live.apiKey.prefix).toBe(live.key.slice(0, 13));

    expect(await client.verifyApiKey({ key: sandbox.key })).toMatchObject({
      keyId: sandbox.apiKey.id,
      projectId: sandboxProject,
      projectName: 'Sandbox',
      environment: Environment.SANDBOX,
      merchantId,
      invoiceLifetimeMinutes: 60,
    });
    expect(await client.verifyApiKey({ key: live.key })).toMatchObject({
      keyId: live.apiKey.id,
      projectId: liveProject,
      environment: Environment.LIVE,
    });
  });

  it('follows project changes (name, invoice lifetime) at once', async () => {
    const project = (await client.createProject({ merchantId, name: 'Renamed later', environment: Environment.SANDBOX })).project!;
    const { key } = await createKey(project.id);
    await client.updateProject({ merchantId, projectId: project.id, name: 'Renamed', invoiceLifetimeMinutes: 15 });
    expect(await client.verifyApiKey({ key })).toMatchObject({ projectName: 'Renamed', invoiceLifetimeMinutes: 15 });
  });

  it('lists keys newest first without the plain key, and records use at most once a minute', async () => {
    const project = (await client.createProject({ merchantId, name: 'Listing', environment: Environment.SANDBOX })).project!;
    const older = await createKey(project.id, 'older');
    const newer = await createKey(project.id, 'newer');

    await client.verifyApiKey({ key: older.key });
    const first = await client.listApiKeys({ merchantId, projectId: project.id });
    expect(first.apiKeys.map((k) => k.name)).toEqual(['newer', 'older']);
    const usedAt = first.apiKeys[1]?.lastUsedAt;
    expect(usedAt).toBeDefined();
    expect(first.apiKeys[0]?.lastUsedAt).toBeUndefined();
    expect(timestampDate(usedAt!).getTime()).toBeGreaterThan(Date.now() - 60_000);

    const listed = JSON.stringify(toJson(ListApiKeysResponseSchema, first));
    for (const { key } of [older, newer]) {
      expect(listed).not.toContain(key);
      expect(listed).not.toContain(key.slice(12));
    }

    // A second use within the minute does not write again.
    await sleep(20);
    await client.verifyApiKey({ key: older.key });
    const second = await client.listApiKeys({ merchantId, projectId: project.id });
    expect(second.apiKeys[1]?.lastUsedAt).toEqual(usedAt);

    // Once the recorded use is older than a minute, the next use updates it.
    await auth.db`update api_keys set last_used_at = now() - interval '61 seconds' where id = ${older.apiKey.id}`;
    await client.verifyApiKey({ key: older.key });
    const third = await client.listApiKeys({ merchantId, projectId: project.id });
    expect(timestampDate(third.apiKeys[1]!.lastUsedAt!).getTime()).toBeGreaterThan(Date.now() - 10_000);
  });

  it('answers InvalidArgument for a missing or oversized key name', async () => {
    for (const name of ['', '   ', 'k'.repeat(101)]) {
      const err = await rpcError(client.createApiKey({ merchantId, projectId: sandboxProject, name }));
      expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
      expect(err.violations.map((v) => v.field)).toEqual(['name']);
    }
  });
});

describe('RevokeApiKey', () => {
  it('refuses the key at once and publishes auth.api_key_revoked on JetStream within a second', async () => {
    const { apiKey, key } = await createKey(sandboxProject, 'to revoke');
    await client.verifyApiKey({ key });

    const subject = auth.namespace.subject('auth.api_key_revoked');
    const watcher = await SubjectWatcher.start(auth.nats, subject, aboutKey(apiKey.id));
    try {
      const revokeStarted = Date.now();
      const revoked = await client.revokeApiKey({ merchantId, projectId: sandboxProject, keyId: apiKey.id });
      const revokedAt = revoked.apiKey!.revokedAt!;
      expect(revoked.apiKey).toMatchObject({ id: apiKey.id, name: 'to revoke' });

      // Refused right after the call returned.
      expect(await rpcError(client.verifyApiKey({ key }))).toMatchObject({ connectCode: Code.Unauthenticated, code: 'invalid_api_key' });

      // The event, as every gateway replica receives it.
      const [received] = await watcher.waitFor(1, 1_000);
      expect(received!.receivedAt - revokeStarted).toBeLessThan(1_000);
      const event = decodeEvent(ApiKeyRevokedSchema, received!.msg);
      expect(event).toMatchObject({ keyId: apiKey.id, projectId: sandboxProject, keyHash: sha256(key) });
      expect(event.revokedAt).toEqual(revokedAt);
      expect(new TextDecoder().decode(received!.msg.data)).not.toContain(key);

      // Stored in the auth stream, with the event id as the JetStream message id.
      const jsm = await auth.nats.jetstreamManager();
      const stored = await jsm.streams.getMessage(auth.namespace.streamName('auth'), { last_by_subj: subject });
      expect(stored.header.get(MSG_ID_HEADER)).toBe(received!.msg.headers?.get(MSG_ID_HEADER));
      expect(stored.header.get(MSG_ID_HEADER)).toMatch(/^[0-9a-f-]{36}$/);
      expect(stored.header.get('event-type')).toBe('auth.api_key_revoked');

      // Listed as revoked; revoking again is a no-op (same revoked_at, no second event).
      const again = await client.revokeApiKey({ merchantId, projectId: sandboxProject, keyId: apiKey.id });
      expect(again.apiKey?.revokedAt).toEqual(revokedAt);
      const listed = await client.listApiKeys({ merchantId, projectId: sandboxProject });
      expect(listed.apiKeys.find((k) => k.id === apiKey.id)?.revokedAt).toEqual(revokedAt);
      await sleep(300);
      expect(watcher.messages).toHaveLength(1);
    } finally {
      await watcher.close();
    }
  });

  it('publishes exactly one event when the same key is revoked concurrently', async () => {
    const { apiKey } = await createKey(liveProject, 'raced');
    await Promise.all(Array.from({ length: 5 }, () => client.revokeApiKey({ merchantId, projectId: liveProject, keyId: apiKey.id })));
    const rows = await auth.db<{ event_key: string }[]>`
      select event_key from outbox where event_type = 'auth.api_key_revoked' and event_key = ${apiKey.id}`;
    expect(rows).toHaveLength(1);
  });

  it('answers not_found for a key of another project of the same merchant', async () => {
    const { apiKey, key } = await createKey(liveProject, 'live only');
    const err = await rpcError(client.revokeApiKey({ merchantId, projectId: sandboxProject, keyId: apiKey.id }));
    expect(err).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
    await client.verifyApiKey({ key });
  });
});

describe('refused keys', () => {
  function corruptions(key: string): string[] {
    const prefixLength = key.startsWith('SBX_') ? 4 : 5;
    const out: string[] = [];
    // Every single-character substitution at a few positions across the body, checksum included.
    for (const position of [prefixLength, prefixLength + 10, prefixLength + 33, prefixLength + 35, key.length - 1]) {
      const original = key[position]!;
      const replacement = BASE62_ALPHABET[(BASE62_ALPHABET.indexOf(original) + 7) % 62]!;
      out.push(key.slice(0, position) + replacement + key.slice(position + 1));
    }
    // Adjacent transposition (of two different characters), truncation, extension, wrong prefix.
    const i = [...key].findIndex((c, j) => j >= prefixLength && key[j + 1] !== undefined && key[j + 1] !== c);
    out.push(key.slice(0, i) + key[i + 1] + key[i] + key.slice(i + 2));
    out.push(key.slice(0, -1), `${key}A`, key.replace(/^(SBX|LIVE)_/, 'TEST_'), key.toLowerCase(), '', ' ', 'x'.repeat(100_000));
    out.push(key.startsWith('SBX_') ? `LIVE_${key.slice(4)}` : `SBX_${key.slice(5)}`);
    return out;
  }

  it('refuses a key with a broken checksum (or any malformed key) without a single database query', async () => {
    const { key } = await createKey(sandboxProject, 'genuine');
    const bad = corruptions(key);
    expect(bad.length).toBeGreaterThan(10);

    queries.count = 0;
    for (const candidate of bad) {
      expect(parseApiKey(candidate).wellFormed).toBe(false);
      expect(await rpcError(client.verifyApiKey({ key: candidate }))).toEqual({
        connectCode: Code.Unauthenticated,
        code: 'invalid_api_key',
        message: 'the API key is invalid or revoked',
        violations: [],
      });
    }
    expect(queries.count).toBe(0);

    // The counter does see the lookups a well-formed key costs.
    await client.verifyApiKey({ key });
    expect(queries.count).toBeGreaterThan(0);
  });

  it('refuses a well-formed key that was never issued (after a lookup) with the same answer', async () => {
    const unknown = buildApiKey('live', randomBase62(API_KEY_RANDOM_LENGTH));
    expect(parseApiKey(unknown).wellFormed).toBe(true);
    queries.count = 0;
    expect(await rpcError(client.verifyApiKey({ key: unknown }))).toMatchObject({
      connectCode: Code.Unauthenticated,
      code: 'invalid_api_key',
      message: 'the API key is invalid or revoked',
    });
    expect(queries.count).toBe(1);
  });
});

describe('internal callers', () => {
  function unary<I extends DescMessage, O extends DescMessage>(path: string, input: I, output: O): grpc.MethodDefinition<MessageShape<I>, MessageShape<O>> {
    return {
      path,
      requestStream: false,
      responseStream: false,
      requestSerialize: (m) => Buffer.from(toBinary(input, m)),
      requestDeserialize: (b) => fromBinary(input, b),
      responseSerialize: (m) => Buffer.from(toBinary(output, m)),
      responseDeserialize: (b) => fromBinary(output, b),
    };
  }
  const definition = {
    verifyApiKey: unary('/coinvoice.auth.v1.AuthService/VerifyApiKey', VerifyApiKeyRequestSchema, VerifyApiKeyResponseSchema),
    getProjectContext: unary('/coinvoice.auth.v1.AuthService/GetProjectContext', GetProjectContextRequestSchema, GetProjectContextResponseSchema),
  } satisfies grpc.ServiceDefinition;
  const GrpcAuthClient = grpc.makeGenericClientConstructor(definition, 'AuthService');

  function call<Req, Res>(client: grpc.Client, method: grpc.MethodDefinition<Req, Res>, request: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(method.path, method.requestSerialize, method.responseDeserialize, request, (err: grpc.ServiceError | null, res?: Res) => {
        if (err || !res) reject(err ?? new Error('no response'));
        else resolve(res);
      });
    });
  }

  it('are answered by a plain @grpc/grpc-js client (VerifyApiKey, GetProjectContext) with gRPC status codes', async () => {
    const { key } = await createKey(sandboxProject, 'grpc-js');
    const client = new GrpcAuthClient(new URL(auth.svc.url).host, grpc.credentials.createInsecure());
    try {
      const verified = await call(client, definition.verifyApiKey, create(VerifyApiKeyRequestSchema, { key }));
      expect(verified).toMatchObject({ projectId: sandboxProject, environment: Environment.SANDBOX, merchantId });
      await expect(call(client, definition.verifyApiKey, create(VerifyApiKeyRequestSchema, { key: `${key.slice(0, -1)}!` }))).rejects.toMatchObject({
        code: grpc.status.UNAUTHENTICATED,
      });
      const context = await call(client, definition.getProjectContext, create(GetProjectContextRequestSchema, { projectId: sandboxProject }));
      expect(context).toMatchObject({ projectId: sandboxProject, projectName: 'Sandbox', merchantId });
      await expect(
        call(client, definition.getProjectContext, create(GetProjectContextRequestSchema, { projectId: '0b8e7f0e-52a4-4c8c-9a0e-1d2c3b4a5f60' })),
      ).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    } finally {
      client.close();
    }
  });

  it('see coinvoice.auth.v1.AuthService SERVING in grpc.health.v1', async () => {
    const health = createRpcClient(Health, auth.svc.url);
    expect((await health.check({ service: 'coinvoice.auth.v1.AuthService' })).status).toBe(ServingStatus.SERVING);
  });
});
