/**
 * The notifier keeps each project's webhook URL and secret (docs/webhook-delivery.md#project-context):
 * a project's events ask auth once, not once per event; auth's signed `auth.project_updated` (a
 * rotated secret, a new URL) reaches the very next event; an unsigned one changes nothing; the
 * directory's own rules (expiry, an answer older than an update, a merchant's request asking now).
 */
import { randomUUID } from 'node:crypto';
import { headers as natsHeaders, type Msg, type NatsConnection, type Subscription } from 'nats';
import { Webhook } from 'standardwebhooks';
import { createLogger, createRpcClient, EventVerifier, parseVerifyKeys } from '@coinvoice/runtime';
import { testEventKeys } from '../../../test/support/event-keys';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { generateWebhookSecret } from '../src/domain/signing';
import { ProjectUpdatesListener } from '../src/events/project-updates';
import { AuthProjectDirectory } from '../src/project-context';
import { invoicePaid } from './support/events';
import { eventually, FakeAuth, Receiver, startNotifier, type Harness } from './support/harness';

let h: Harness;
const silent = createLogger({ service: 'project-context-test', level: 'silent' });
const receivers: Receiver[] = [];

beforeAll(async () => {
  h = await startNotifier();
});
afterAll(async () => {
  for (const r of receivers) await r.stop();
  await h?.dispose();
});

async function receiver(): Promise<Receiver> {
  const r = await new Receiver().start();
  receivers.push(r);
  return r;
}

const verifies = (secret: string, request: { body: string; headers: Record<string, unknown> }) => {
  try {
    new Webhook(secret).verify(request.body, request.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
};

describe('the notifier keeps project contexts', () => {
  it("asks auth once for a project's events, not once per event", async () => {
    const r = await receiver();
    const project = h.auth.addProject({ webhookUrl: r.url });
    const before = h.auth.calls;
    for (let i = 0; i < 20; i++) await h.publish('invoice.paid', invoicePaid(project.id));
    const requests = await r.waitFor(20, 15_000);
    expect(requests.every((request) => verifies(project.webhookSecret, request))).toBe(true);
    expect(h.auth.calls - before).toBe(1);
  });

  it("auth's signed project update reaches the next event: a rotated secret signs it, a new URL receives it", async () => {
    const first = await receiver();
    const second = await receiver();
    const project = h.auth.addProject({ webhookUrl: first.url });
    await h.publish('invoice.paid', invoicePaid(project.id));
    const [before] = await first.waitFor(1);
    expect(verifies(project.webhookSecret, before!)).toBe(true);

    const rotated = generateWebhookSecret();
    await h.updateProject(project.id, { webhookSecret: rotated });
    await h.publish('invoice.paid', invoicePaid(project.id));
    const [, afterRotation] = await first.waitFor(2);
    expect(verifies(rotated, afterRotation!)).toBe(true);
    expect(verifies(project.webhookSecret, afterRotation!)).toBe(false);

    await h.updateProject(project.id, { webhookUrl: second.url });
    await h.publish('invoice.paid', invoicePaid(project.id));
    const [moved] = await second.waitFor(1);
    expect(verifies(rotated, moved!)).toBe(true);
    expect(first.requests).toHaveLength(2);
  });

  it("a webhook URL set just now, before auth's update arrived: the next event is delivered, not dropped for a cached \"no URL\"", async () => {
    const r = await receiver();
    const project = h.auth.addProject({});
    await h.publish('invoice.paid', invoicePaid(project.id)); // cached: no webhook URL
    await eventually(async () => {
      const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from project_events where project_id = ${project.id}`;
      return row?.n === 1 ? true : undefined;
    });
    // auth answers with the URL from now on; its update is late (not published here).
    h.auth.projects.set(project.id, { ...project, webhookUrl: r.url });
    const eventId = await h.publish('invoice.paid', invoicePaid(project.id));
    const [request] = await r.waitFor(1);
    expect(request?.headers['webhook-id']).toBe(eventId);
  });

  it('an unsigned project update is ignored: the cached context stays', async () => {
    const r = await receiver();
    const project = h.auth.addProject({ webhookUrl: r.url });
    await h.publish('invoice.paid', invoicePaid(project.id));
    await r.waitFor(1);
    // auth's answer changes, but only a forged (unsigned) update says so.
    h.auth.projects.set(project.id, { ...project, webhookSecret: generateWebhookSecret() });
    const forged = natsHeaders();
    forged.set('Nats-Msg-Id', randomUUID());
    h.nats.publish(h.namespace.subject('auth.project_updated'), new TextEncoder().encode(JSON.stringify({ projectId: project.id })), { headers: forged });
    await h.nats.flush();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const before = h.auth.calls;
    await h.publish('invoice.paid', invoicePaid(project.id));
    const [, second] = await r.waitFor(2);
    expect(verifies(project.webhookSecret, second!)).toBe(true);
    expect(h.auth.calls).toBe(before);
  });
});

describe('AuthProjectDirectory', () => {
  let auth: FakeAuth;
  let clock: number;
  const directory = () =>
    new AuthProjectDirectory(createRpcClient(AuthService, auth.url, { timeoutMs: 2_000 }), { ttlMs: 60_000, now: () => clock });

  beforeAll(async () => {
    auth = new FakeAuth();
    await auth.start();
  });
  afterAll(async () => auth?.stop());
  beforeEach(() => {
    clock = 1_000_000;
  });

  it('asks again after ttlMs; a project auth does not know is asked again each time', async () => {
    const projects = directory();
    const project = auth.addProject({ webhookUrl: 'https://shop.example/hook' });
    const start = auth.calls;
    await Promise.all([projects.get(project.id), projects.get(project.id)]); // one call for both
    await projects.get(project.id);
    expect(auth.calls - start).toBe(1);
    clock += 60_001;
    expect((await projects.get(project.id))?.webhookUrl).toBe('https://shop.example/hook');
    expect(auth.calls - start).toBe(2);

    const unknown = randomUUID();
    expect(await projects.get(unknown)).toBeUndefined();
    expect(await projects.get(unknown)).toBeUndefined();
    expect(auth.calls - start).toBe(4);
  });

  it('an answer asked before an update and arriving after it is not kept; current() asks now and keeps its answer', async () => {
    const project = auth.addProject({ webhookUrl: 'https://shop.example/old' });
    // auth's answers held back until released, to order them against the update.
    const held: Array<() => void> = [];
    const real = createRpcClient(AuthService, auth.url, { timeoutMs: 2_000 });
    const heldBack: Pick<typeof real, 'getProjectContext'> = {
      async getProjectContext(req) {
        const answer = await real.getProjectContext(req);
        if (held.length === 0 && answer.webhookUrl?.endsWith('/old')) await new Promise<void>((resolve) => held.push(resolve));
        return answer;
      },
    };
    const projects = new AuthProjectDirectory(heldBack, { ttlMs: 60_000, now: () => clock });
    const asked = projects.get(project.id); // auth answers the old URL; the answer is held
    await eventually(async () => (held.length === 1 ? true : undefined));
    auth.projects.set(project.id, { ...project, webhookUrl: 'https://shop.example/new' });
    projects.forget(project.id); // the update arrives before that answer
    held[0]!();
    expect((await asked)?.webhookUrl).toBe('https://shop.example/old');
    expect((await projects.get(project.id))?.webhookUrl).toBe('https://shop.example/new');

    auth.projects.set(project.id, { ...project, webhookUrl: 'https://shop.example/newest' });
    expect((await projects.get(project.id))?.webhookUrl).toBe('https://shop.example/new'); // cached
    expect((await projects.current(project.id))?.webhookUrl).toBe('https://shop.example/newest');
    expect((await projects.get(project.id))?.webhookUrl).toBe('https://shop.example/newest');

    auth.projects.set(project.id, { ...project, webhookUrl: 'https://shop.example/after-clear' });
    projects.clear();
    expect((await projects.get(project.id))?.webhookUrl).toBe('https://shop.example/after-clear');
  });
});

describe('ProjectUpdatesListener', () => {
  it('a subscription that fails (no permission to read auth.project_updated) stops the caching: every ask goes to auth', async () => {
    const auth = await new FakeAuth().start();
    try {
      const projects = new AuthProjectDirectory(createRpcClient(AuthService, auth.url, { timeoutMs: 2_000 }), { ttlMs: 60_000 });
      // A NATS connection whose subscription the server refuses, as nats.js reports it: the callback gets the error.
      let callback: ((err: Error | null, msg: Msg) => void) | undefined;
      const refusing = {
        subscribe: (_subject: string, options: { callback: (err: Error | null, msg: Msg) => void }) => {
          callback = options.callback;
          return { unsubscribe: () => undefined } as Subscription;
        },
        status: () => (async function* () {})(),
        flush: async () => undefined,
      } as unknown as NatsConnection;
      const listener = new ProjectUpdatesListener({ nats: refusing, namespace: 'ctx', verifier: new EventVerifier(parseVerifyKeys(testEventKeys().verifyKeys) ?? new Map()), logger: silent, directory: projects });
      await listener.start();
      const project = auth.addProject({ webhookUrl: 'https://shop.example/hook' });
      await projects.get(project.id);
      await projects.get(project.id);
      expect(auth.calls).toBe(1); // cached while the subscription stands

      callback!(new Error("Permissions Violation for Subscription to \"ctx.auth.project_updated\""), {} as Msg);
      auth.projects.set(project.id, { ...project, webhookUrl: 'https://shop.example/new' });
      expect((await projects.get(project.id))?.webhookUrl).toBe('https://shop.example/new');
      await projects.get(project.id);
      expect(auth.calls).toBe(3);
      listener.stop();
    } finally {
      await auth.stop();
    }
  });

  it('stopped (its connection given up), it stops the caching too: no invalidation would arrive', async () => {
    const auth = await new FakeAuth().start();
    try {
      const projects = new AuthProjectDirectory(createRpcClient(AuthService, auth.url, { timeoutMs: 2_000 }), { ttlMs: 60_000, caching: false });
      const quiet = {
        subscribe: () => ({ unsubscribe: () => undefined }) as unknown as Subscription,
        status: () => (async function* () {})(),
        flush: async () => undefined,
      } as unknown as NatsConnection;
      const listener = new ProjectUpdatesListener({ nats: quiet, namespace: 'ctx', verifier: new EventVerifier(parseVerifyKeys(testEventKeys().verifyKeys) ?? new Map()), logger: silent, directory: projects });
      const project = auth.addProject({ webhookUrl: 'https://shop.example/hook' });
      // Not subscribed yet: nothing kept.
      await projects.get(project.id);
      await projects.get(project.id);
      expect(auth.calls).toBe(2);
      await listener.start();
      await projects.get(project.id);
      await projects.get(project.id);
      expect(auth.calls).toBe(3);
      listener.stop();
      auth.projects.set(project.id, { ...project, webhookUrl: 'https://shop.example/changed' });
      expect((await projects.get(project.id))?.webhookUrl).toBe('https://shop.example/changed');
      await projects.get(project.id);
      expect(auth.calls).toBe(5);
    } finally {
      await auth.stop();
    }
  });
});
