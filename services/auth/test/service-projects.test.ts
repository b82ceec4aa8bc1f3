/**
 * Projects through the gRPC API: create, list, get, partial update, webhook secret rotation, the
 * internal GetProjectContext, the auth.project_updated event, validation, and ownership (another
 * merchant's project answers not_found exactly like a missing one).
 */
import { toJson } from '@bufbuild/protobuf';
import { Code, createLogger } from '@coinvoice/runtime';
import { GetProjectResponseSchema, ListProjectsResponseSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { ProjectUpdatedSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/events_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { webhookSecretKey } from '../src/domain/webhook-secrets';
import { defineAuthService } from '../src/server';
import { previousSecretEraser } from '../src/previous-secret-eraser';
import {
  aboutKey,
  decodeEvent,
  register,
  rpcError,
  startAuth,
  SubjectWatcher,
  type AuthClient,
  type StartedAuth,
} from './support/auth';

let auth: StartedAuth;
let client: AuthClient;
let alice: string;
let bob: string;

beforeAll(async () => {
  auth = await startAuth();
  client = auth.client;
  alice = (await register(auth, { name: 'Alice' })).merchant.id;
  bob = (await register(auth, { name: 'Bob' })).merchant.id;
});

afterAll(async () => {
  await auth?.dispose();
});

async function createProject(merchantId: string, overrides: { name?: string; environment?: Environment; webhookUrl?: string } = {}) {
  const res = await client.createProject({
    merchantId,
    name: overrides.name ?? 'Shop',
    environment: overrides.environment ?? Environment.SANDBOX,
    ...(overrides.webhookUrl === undefined ? {} : { webhookUrl: overrides.webhookUrl }),
  });
  return { project: res.project!, webhookSecret: res.webhookSecret };
}

describe('CreateProject, ListProjects, GetProject', () => {
  it('creates a sandbox project with a webhook and returns its secret once', async () => {
    const { project, webhookSecret } = await createProject(alice, { name: ' Sandbox shop ', webhookUrl: 'https://shop.example.com/hooks?x=1' });
    expect(project).toMatchObject({
      merchantId: alice,
      name: 'Sandbox shop',
      environment: Environment.SANDBOX,
      webhookUrl: 'https://shop.example.com/hooks?x=1',
      invoiceLifetimeMinutes: 60,
    });
    expect(project.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(webhookSecret).toMatch(/^whsec_/);
    expect(webhookSecretKey(webhookSecret)).toHaveLength(32);

    const got = await client.getProject({ merchantId: alice, projectId: project.id });
    expect(got.project).toEqual(project);
    expect(JSON.stringify(toJson(GetProjectResponseSchema, got))).not.toContain(webhookSecret.slice('whsec_'.length));
    const listed = await client.listProjects({ merchantId: alice });
    expect(JSON.stringify(toJson(ListProjectsResponseSchema, listed))).not.toContain(webhookSecret.slice('whsec_'.length));
  });

  it('creates a live project without a webhook', async () => {
    for (const webhookUrl of [undefined, '']) {
      const { project } = await createProject(alice, { environment: Environment.LIVE, ...(webhookUrl === undefined ? {} : { webhookUrl }) });
      expect(project.environment).toBe(Environment.LIVE);
      expect(project.webhookUrl).toBeUndefined();
    }
  });

  it("lists only the merchant's own projects, oldest first", async () => {
    const carol = (await register(auth)).merchant.id;
    const first = await createProject(carol, { name: 'first' });
    const second = await createProject(carol, { name: 'second' });
    await createProject(bob, { name: 'not carols' });
    const listed = await client.listProjects({ merchantId: carol });
    expect(listed.projects.map((p) => p.id)).toEqual([first.project.id, second.project.id]);
    expect((await client.listProjects({ merchantId: 'garbage' })).projects).toEqual([]);
  });

  it('answers not_found when the merchant does not exist', async () => {
    const err = await rpcError(client.createProject({ merchantId: '00000000-0000-4000-8000-000000000000', name: 'x', environment: Environment.LIVE }));
    expect(err).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
  });

  it.each([
    ['no name, no environment', {}, ['name', 'environment']],
    ['an oversized name', { name: 'n'.repeat(101), environment: Environment.LIVE }, ['name']],
    ['an unknown environment number', { name: 'x', environment: 7 as Environment }, ['environment']],
    ['a non-http webhook URL', { name: 'x', environment: Environment.LIVE, webhookUrl: 'ftp://example.com/x' }, ['webhookUrl']],
    ['a relative webhook URL', { name: 'x', environment: Environment.LIVE, webhookUrl: '/hooks' }, ['webhookUrl']],
    ['a javascript: URL', { name: 'x', environment: Environment.LIVE, webhookUrl: 'javascript:alert(1)' }, ['webhookUrl']],
    ['a URL with credentials', { name: 'x', environment: Environment.LIVE, webhookUrl: 'https://u:p@example.com/' }, ['webhookUrl']],
    ['an oversized URL', { name: 'x', environment: Environment.LIVE, webhookUrl: `https://example.com/${'a'.repeat(2100)}` }, ['webhookUrl']],
  ])('CreateProject with %s answers InvalidArgument', async (_label, request, fields) => {
    const err = await rpcError(client.createProject({ merchantId: alice, ...request }));
    expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
    expect(err.violations.map((v) => v.field)).toEqual(fields);
  });
});

describe('UpdateProject and RotateWebhookSecret', () => {
  it('changes only the fields that are set, removes the webhook with "", and publishes auth.project_updated', async () => {
    const { project } = await createProject(alice, { name: 'Before', webhookUrl: 'https://a.example.com/h' });
    const watcher = await SubjectWatcher.start(auth.nats, auth.namespace.subject('auth.project_updated'), aboutKey(project.id));
    try {
      const renamed = await client.updateProject({ merchantId: alice, projectId: project.id, name: 'After' });
      expect(renamed.project).toEqual({ ...project, name: 'After' });

      const lifetime = await client.updateProject({ merchantId: alice, projectId: project.id, invoiceLifetimeMinutes: 30 });
      expect(lifetime.project).toMatchObject({ name: 'After', invoiceLifetimeMinutes: 30, webhookUrl: 'https://a.example.com/h' });

      const removed = await client.updateProject({ merchantId: alice, projectId: project.id, webhookUrl: '' });
      expect(removed.project?.webhookUrl).toBeUndefined();
      expect(removed.project).toMatchObject({ name: 'After', invoiceLifetimeMinutes: 30, environment: Environment.SANDBOX });

      // Nothing set: nothing changes, no event.
      const unchanged = await client.updateProject({ merchantId: alice, projectId: project.id });
      expect(unchanged.project).toEqual(removed.project);

      const events = (await watcher.waitFor(3)).map(({ msg }) => decodeEvent(ProjectUpdatedSchema, msg));
      expect(events.map((e) => [e.name, e.invoiceLifetimeMinutes, e.webhookUrl, e.webhookSecretRotated])).toEqual([
        ['After', 60, 'https://a.example.com/h', false],
        ['After', 30, 'https://a.example.com/h', false],
        ['After', 30, undefined, false],
      ]);
      for (const event of events) expect(event).toMatchObject({ projectId: project.id, merchantId: alice });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(watcher.messages).toHaveLength(3);
    } finally {
      await watcher.close();
    }
  });

  it.each([
    ['a lifetime of 0', { invoiceLifetimeMinutes: 0 }, ['invoiceLifetimeMinutes']],
    ['a lifetime below 5 minutes', { invoiceLifetimeMinutes: 4 }, ['invoiceLifetimeMinutes']],
    ['a lifetime above a week', { invoiceLifetimeMinutes: 10_081 }, ['invoiceLifetimeMinutes']],
    ['a negative lifetime', { invoiceLifetimeMinutes: -60 }, ['invoiceLifetimeMinutes']],
    ['a blank name', { name: '' }, ['name']],
    ['an invalid URL and name', { name: 'x'.repeat(200), webhookUrl: 'not a url' }, ['name', 'webhookUrl']],
  ])('UpdateProject with %s answers InvalidArgument and changes nothing', async (_label, changes, fields) => {
    const { project } = await createProject(alice);
    const err = await rpcError(client.updateProject({ merchantId: alice, projectId: project.id, ...changes }));
    expect(err).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
    expect(err.violations.map((v) => v.field)).toEqual(fields);
    expect((await client.getProject({ merchantId: alice, projectId: project.id })).project).toEqual(project);
  });

  it('accepts the lifetime bounds 5 and 10080', async () => {
    const { project } = await createProject(alice);
    for (const minutes of [5, 10_080]) {
      const res = await client.updateProject({ merchantId: alice, projectId: project.id, invoiceLifetimeMinutes: minutes });
      expect(res.project?.invoiceLifetimeMinutes).toBe(minutes);
    }
  });

  it('rotates the webhook secret: a new secret, seen by GetProjectContext, announced without the secret', async () => {
    const { project, webhookSecret } = await createProject(alice, { webhookUrl: 'https://b.example.com/h' });
    const watcher = await SubjectWatcher.start(auth.nats, auth.namespace.subject('auth.project_updated'), aboutKey(project.id));
    try {
      const rotated = await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id });
      expect(rotated.webhookSecret).toMatch(/^whsec_/);
      expect(rotated.webhookSecret).not.toBe(webhookSecret);
      const context = await client.getProjectContext({ projectId: project.id });
      expect(context.webhookSecret).toBe(rotated.webhookSecret);

      const [received] = await watcher.waitFor(1);
      const msg = received!.msg;
      const event = decodeEvent(ProjectUpdatedSchema, msg);
      expect(event).toMatchObject({ projectId: project.id, webhookSecretRotated: true, webhookUrl: 'https://b.example.com/h' });
      expect(timestampDate(event.updatedAt!).getTime()).toBeGreaterThan(Date.now() - 60_000);
      const raw = new TextDecoder().decode(msg.data);
      expect(raw).not.toContain(rotated.webhookSecret.slice('whsec_'.length));
      expect(raw).not.toContain(webhookSecret.slice('whsec_'.length));
    } finally {
      await watcher.close();
    }
  });
});

describe('RotateWebhookSecret: replaced secrets sign on for a while (docs/webhook-delivery.md#secret-rotation)', () => {
  const minutesFromNow = (at: Date) => (at.getTime() - Date.now()) / 60_000;
  const previousOf = async (projectId: string) =>
    (await client.getProjectContext({ projectId })).previousWebhookSecrets.map((p) => ({ secret: p.secret, expiresAt: timestampDate(p.expiresAt!) }));

  it('keeps the replaced secret for a day by default: in the project, in the context the notifier signs with', async () => {
    const { project, webhookSecret: original } = await createProject(alice, { webhookUrl: 'https://overlap.example.com/h' });
    expect(project.previousWebhookSecretExpiresAt).toBeUndefined();
    expect(await previousOf(project.id)).toEqual([]);

    const rotated = await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id });
    const until = timestampDate(rotated.previousSecretExpiresAt!);
    expect(minutesFromNow(until)).toBeGreaterThan(1439);
    expect(minutesFromNow(until)).toBeLessThanOrEqual(1440);
    const context = await client.getProjectContext({ projectId: project.id });
    expect(context.webhookSecret).toBe(rotated.webhookSecret);
    expect(await previousOf(project.id)).toEqual([{ secret: original, expiresAt: until }]);
    expect(timestampDate((await client.getProject({ merchantId: alice, projectId: project.id })).project!.previousWebhookSecretExpiresAt!)).toEqual(until);
    // Never in plaintext at rest.
    const stored = await auth.db<{ secret: string }[]>`select secret from previous_webhook_secrets where project_id = ${project.id}`;
    expect(stored).toHaveLength(1);
    expect(stored[0]!.secret).toMatch(/^v1\./);
    expect(stored[0]!.secret).not.toContain(original.slice(6));
  });

  it('a rotation retried (its answer lost) keeps the secret the receiver still checks: every replaced secret signs until its own expiry, three at most', async () => {
    const { project, webhookSecret: deployed } = await createProject(alice, { webhookUrl: 'https://retry.example.com/h' });
    const first = await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id });
    const second = await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id, previousSecretExpiresInMinutes: 30 });
    const context = await client.getProjectContext({ projectId: project.id });
    expect(context.webhookSecret).toBe(second.webhookSecret);
    // The one ending last first.
    expect((await previousOf(project.id)).map((p) => p.secret)).toEqual([deployed, first.webhookSecret]);
    expect(minutesFromNow(timestampDate(second.previousSecretExpiresAt!))).toBeGreaterThan(29);
    expect(minutesFromNow(timestampDate(second.previousSecretExpiresAt!))).toBeLessThanOrEqual(30);
    // The project shows when the last of them stops.
    expect(timestampDate((await client.getProject({ merchantId: alice, projectId: project.id })).project!.previousWebhookSecretExpiresAt!)).toEqual(
      timestampDate(first.previousSecretExpiresAt!),
    );

    // Two more: four replaced, the three ending last are kept (the 30-minute one goes).
    const third = await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id, previousSecretExpiresInMinutes: 60 });
    const fourth = await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id, previousSecretExpiresInMinutes: 120 });
    expect((await client.getProjectContext({ projectId: project.id })).webhookSecret).toBe(fourth.webhookSecret);
    expect((await previousOf(project.id)).map((p) => p.secret)).toEqual([deployed, third.webhookSecret, second.webhookSecret]);
    expect(await auth.db`select id from previous_webhook_secrets where project_id = ${project.id}`).toHaveLength(3);
  });

  it('0 minutes: the replaced secret does not sign at all (a leaked secret); those replaced before keep their expiry', async () => {
    const { project, webhookSecret: original } = await createProject(alice, { webhookUrl: 'https://leaked.example.com/h' });
    const first = await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id });
    const rotated = await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id, previousSecretExpiresInMinutes: 0 });
    expect(rotated.previousSecretExpiresAt).toBeUndefined();
    expect((await previousOf(project.id)).map((p) => p.secret)).toEqual([original]);
    expect((await previousOf(project.id)).map((p) => p.secret)).not.toContain(first.webhookSecret);

    const fresh = await createProject(alice);
    await client.rotateWebhookSecret({ merchantId: alice, projectId: fresh.project.id, previousSecretExpiresInMinutes: 0 });
    expect(await previousOf(fresh.project.id)).toEqual([]);
    expect((await client.getProject({ merchantId: alice, projectId: fresh.project.id })).project!.previousWebhookSecretExpiresAt).toBeUndefined();
    expect(await auth.db`select id from previous_webhook_secrets where project_id = ${fresh.project.id}`).toHaveLength(0);
  });

  it('refuses an overlap outside 0 to 1440 minutes, changing nothing', async () => {
    const { project, webhookSecret } = await createProject(alice);
    for (const minutes of [-1, 1441, 100_000]) {
      expect(await rpcError(client.rotateWebhookSecret({ merchantId: alice, projectId: project.id, previousSecretExpiresInMinutes: minutes }))).toMatchObject({
        connectCode: Code.InvalidArgument,
        code: 'validation_failed',
        violations: [{ field: 'previousSecretExpiresInMinutes', message: 'must be a whole number of minutes from 0 to 1440' }],
      });
    }
    expect((await client.getProjectContext({ projectId: project.id })).webhookSecret).toBe(webhookSecret);
    expect(await previousOf(project.id)).toEqual([]);
  });

  it('an overlap that ran out hands nothing out: not in the context, not in the project', async () => {
    const { project } = await createProject(alice);
    await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id, previousSecretExpiresInMinutes: 1 });
    expect(await previousOf(project.id)).toHaveLength(1);
    // A minute later, as Postgres' clock sees it.
    await auth.db`update previous_webhook_secrets set expires_at = now() - interval '1 millisecond' where project_id = ${project.id}`;
    expect(await previousOf(project.id)).toEqual([]);
    expect((await client.getProject({ merchantId: alice, projectId: project.id })).project!.previousWebhookSecretExpiresAt).toBeUndefined();
    expect((await client.listProjects({ merchantId: alice })).projects.find((p) => p.id === project.id)!.previousWebhookSecretExpiresAt).toBeUndefined();
  });

  it('an expired replaced secret is erased from the database (the eraser), one in force is kept', async () => {
    const expired = await createProject(alice);
    const kept = await createProject(alice);
    await client.rotateWebhookSecret({ merchantId: alice, projectId: expired.project.id, previousSecretExpiresInMinutes: 1 });
    await client.rotateWebhookSecret({ merchantId: alice, projectId: kept.project.id, previousSecretExpiresInMinutes: 1 });
    const eraser = previousSecretEraser({ sql: auth.db, logger: createLogger({ service: 'test', level: 'silent' }) });
    while ((await eraser.processBatch()) > 0); // what earlier tests left expired
    await auth.db`update previous_webhook_secrets set expires_at = now() - interval '1 second' where project_id = ${expired.project.id}`;

    expect(await eraser.processBatch()).toBe(1);
    expect(await eraser.processBatch()).toBe(0);
    expect(await auth.db`select id from previous_webhook_secrets where project_id = ${expired.project.id}`).toHaveLength(0);
    expect(await auth.db`select id from previous_webhook_secrets where project_id = ${kept.project.id}`).toHaveLength(1);
    expect((await previousOf(kept.project.id)).map((p) => p.secret)).toEqual([kept.webhookSecret]);
  });

  it('EndPreviousWebhookSecret stops them all now and tells the notifiers; another merchant\'s project is not_found', async () => {
    const { project } = await createProject(alice, { webhookUrl: 'https://end.example.com/h' });
    const watcher = await SubjectWatcher.start(auth.nats, auth.namespace.subject('auth.project_updated'), aboutKey(project.id));
    try {
      await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id });
      await client.rotateWebhookSecret({ merchantId: alice, projectId: project.id });
      await watcher.waitFor(2);
      expect(await rpcError(client.endPreviousWebhookSecret({ merchantId: bob, projectId: project.id }))).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
      expect(await previousOf(project.id)).toHaveLength(2);

      const ended = await client.endPreviousWebhookSecret({ merchantId: alice, projectId: project.id });
      expect(ended.project!.id).toBe(project.id);
      expect(ended.project!.previousWebhookSecretExpiresAt).toBeUndefined();
      expect(await previousOf(project.id)).toEqual([]);
      const [, , received] = await watcher.waitFor(3);
      expect(decodeEvent(ProjectUpdatedSchema, received!.msg)).toMatchObject({ projectId: project.id, webhookSecretRotated: true });

      // Nothing left to end: answered alike, no further event.
      expect((await client.endPreviousWebhookSecret({ merchantId: alice, projectId: project.id })).project!.previousWebhookSecretExpiresAt).toBeUndefined();
      await new Promise((r) => setTimeout(r, 300));
      expect(watcher.messages).toHaveLength(3);
    } finally {
      await watcher.close();
    }
  });
});

describe('GetProjectContext (internal)', () => {
  it('returns the project with its merchant email, webhook URL and secret', async () => {
    const owner = await register(auth, { email: 'Owner.Context@Example.com' });
    const { project, webhookSecret } = await createProject(owner.merchant.id, {
      name: 'Ctx',
      environment: Environment.LIVE,
      webhookUrl: 'http://hooks.example.net:8080/in',
    });
    const context = await client.getProjectContext({ projectId: project.id });
    expect(context).toMatchObject({
      projectId: project.id,
      projectName: 'Ctx',
      environment: Environment.LIVE,
      merchantId: owner.merchant.id,
      merchantEmail: 'owner.context@example.com',
      webhookUrl: 'http://hooks.example.net:8080/in',
      webhookSecret,
      invoiceLifetimeMinutes: 60,
    });
    const noHook = await createProject(owner.merchant.id);
    expect((await client.getProjectContext({ projectId: noHook.project.id })).webhookUrl).toBeUndefined();
  });

  it('answers not_found for an unknown or malformed project id', async () => {
    for (const projectId of ['6d1f5bb4-5b0e-4f7c-9a43-0c1f2f9e8a11', 'x', '']) {
      expect(await rpcError(client.getProjectContext({ projectId }))).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
    }
  });
});

describe("another merchant's project", () => {
  it('answers not_found on every project and key RPC, exactly as for a project that does not exist, and changes nothing', async () => {
    const { project } = await createProject(alice, { name: 'Alice only', webhookUrl: 'https://alice.example.com/h' });
    const key = await client.createApiKey({ merchantId: alice, projectId: project.id, name: 'server' });
    const keyId = key.apiKey!.id;
    const missing = '8a0c3a57-3c4b-4f2e-8d1a-5e6f7a8b9c0d';

    const attempts = (projectId: string) => [
      client.getProject({ merchantId: bob, projectId }),
      client.updateProject({ merchantId: bob, projectId, name: 'Bob was here', webhookUrl: 'https://bob.example.com/' }),
      client.rotateWebhookSecret({ merchantId: bob, projectId }),
      client.createApiKey({ merchantId: bob, projectId, name: 'bob key' }),
      client.listApiKeys({ merchantId: bob, projectId }),
      client.revokeApiKey({ merchantId: bob, projectId, keyId }),
    ];
    const foreign = await Promise.all(attempts(project.id).map(rpcError));
    const absent = await Promise.all(attempts(missing).map(rpcError));
    for (const err of foreign) expect(err).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
    expect(foreign).toEqual(absent);

    // Malformed ids and a foreign key id under Bob's own project: not_found too.
    const bobs = await createProject(bob);
    expect(await rpcError(client.revokeApiKey({ merchantId: bob, projectId: bobs.project.id, keyId }))).toMatchObject({ code: 'not_found' });
    expect(await rpcError(client.getProject({ merchantId: alice, projectId: 'nope' }))).toMatchObject({ code: 'not_found' });
    expect(await rpcError(client.getProject({ merchantId: '', projectId: project.id }))).toMatchObject({ code: 'not_found' });
    expect((await client.listProjects({ merchantId: bob })).projects.map((p) => p.id)).not.toContain(project.id);

    // Nothing changed for Alice.
    expect((await client.getProject({ merchantId: alice, projectId: project.id })).project).toEqual(project);
    const keys = await client.listApiKeys({ merchantId: alice, projectId: project.id });
    expect(keys.apiKeys.map((k) => [k.id, k.revokedAt])).toEqual([[keyId, undefined]]);
    const context = await client.getProjectContext({ projectId: project.id });
    expect(context.webhookUrl).toBe('https://alice.example.com/h');
  });
});

describe('WebhookUrlPolicy seam', () => {
  it('lets an injected policy refuse destinations on create and update (webhookUrl violation)', async () => {
    const guarded = await startAuth({
      definition: defineAuthService({
        webhookUrlPolicy: {
          refusal: (url) =>
            Promise.resolve(new URL(url).hostname === '127.0.0.1' ? 'must not point to a private or loopback address' : undefined),
        },
      }),
    });
    try {
      const owner = (await register(guarded)).merchant.id;
      const create = await rpcError(
        guarded.client.createProject({ merchantId: owner, name: 'x', environment: Environment.LIVE, webhookUrl: 'http://127.0.0.1:9/h' }),
      );
      expect(create).toMatchObject({ connectCode: Code.InvalidArgument, code: 'validation_failed' });
      expect(create.violations).toEqual([{ field: 'webhookUrl', message: 'must not point to a private or loopback address' }]);

      const ok = await guarded.client.createProject({ merchantId: owner, name: 'x', environment: Environment.LIVE, webhookUrl: 'https://example.com/h' });
      const update = await rpcError(
        guarded.client.updateProject({ merchantId: owner, projectId: ok.project!.id, webhookUrl: 'http://127.0.0.1/h' }),
      );
      expect(update.violations).toEqual([{ field: 'webhookUrl', message: 'must not point to a private or loopback address' }]);
      // Removing the webhook is never refused.
      await guarded.client.updateProject({ merchantId: owner, projectId: ok.project!.id, webhookUrl: '' });
    } finally {
      await guarded.dispose();
    }
  });

  it('accepts loopback destinations by default (syntax only until the notifier guard is wired in)', async () => {
    const { project } = await createProject(alice, { webhookUrl: 'http://127.0.0.1:3000/hooks' });
    expect(project.webhookUrl).toBe('http://127.0.0.1:3000/hooks');
  });
});
