/**
 * What the notifier service tests share: the notifier started in-process (fresh database, event
 * namespace of its own, real Postgres and NATS), a stand-in for the auth service's
 * GetProjectContext (a real gRPC server whose projects the test sets), a real HTTP receiver on
 * 127.0.0.1 whose answers the test scripts, and a publisher that puts events on the streams the
 * way the other services' outbox relays do.
 */
import { randomUUID } from 'node:crypto';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { JsonValue } from '@bufbuild/protobuf';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import {
  connectNats,
  createDb,
  createLogger,
  createRpcClient,
  ensureServiceStream,
  EVENT_HEADERS,
  EventNamespace,
  type Sql,
} from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { headers as natsHeaders, type NatsConnection } from 'nats';
import { startTestService, type TestService } from '../../../../test/support/service';
import { testNatsUrl } from '../../../../test/support/infra';
import { generateWebhookSecret } from '../../src/domain/signing';
import { notifierService } from '../../src/server';

export { eventually, Receiver, type ReceivedRequest, type Responder } from './receiver';

export interface FakeProject {
  webhookUrl?: string;
  webhookSecret: string;
  merchantEmail: string;
}

/** GetProjectContext over real gRPC, answering from a map the test controls. */
export class FakeAuth {
  readonly projects = new Map<string, FakeProject>();
  calls = 0;
  /** When set, every call fails with Unavailable (auth down). */
  down = false;
  private server: http2.Http2Server | undefined;
  url = '';

  async start(): Promise<void> {
    const handler = connectNodeAdapter({
      routes: (router) => {
        router.rpc(AuthService.method.getProjectContext, async (req) => {
          this.calls++;
          if (this.down) throw new ConnectError('auth is down (test)', Code.Unavailable);
          const project = this.projects.get(req.projectId);
          if (!project) throw new ConnectError('project not found', Code.NotFound);
          return {
            projectId: req.projectId,
            projectName: 'Test shop',
            environment: Environment.SANDBOX,
            merchantId: randomUUID(),
            merchantEmail: project.merchantEmail,
            webhookUrl: project.webhookUrl,
            webhookSecret: project.webhookSecret,
            invoiceLifetimeMinutes: 60,
          };
        });
      },
    });
    this.server = http2.createServer(handler);
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  addProject(project: Partial<FakeProject> = {}): { id: string } & FakeProject {
    const id = randomUUID();
    const full = { webhookSecret: generateWebhookSecret(), merchantEmail: `m-${id.slice(0, 8)}@example.com`, ...project };
    this.projects.set(id, full);
    return { id, ...full };
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

export interface PublishOptions {
  id?: string;
  key?: string;
}

export interface Harness {
  svc: TestService;
  auth: FakeAuth;
  client: Client<typeof NotifierService>;
  /** A pool on the notifier's schema. */
  sql: Sql;
  nats: NatsConnection;
  namespace: EventNamespace;
  /** Publishes an event as a service's outbox relay does (msgID = event id, event-type and event-key headers). */
  publish(type: string, payload: JsonValue, options?: PublishOptions): Promise<string>;
  dispose(): Promise<void>;
}

export async function startNotifier(env: NodeJS.ProcessEnv = {}): Promise<Harness> {
  const auth = new FakeAuth();
  await auth.start();
  const svc = await startTestService(notifierService, {
    env: { AUTH_URL: auth.url, WEBHOOK_RETRY_SCHEDULE: '100ms,200ms', WEBHOOK_POLL_INTERVAL_MS: '500', ...env },
  });
  const client = createRpcClient(NotifierService, svc.url);
  const sql = createDb({ url: svc.database.url, schema: 'notifier', max: 3 });
  const nats = await connectNats({ url: testNatsUrl(), name: 'notifier-test', logger: createLogger({ service: 'test', level: 'silent' }) });
  const namespace = new EventNamespace(svc.namespace);
  const js = nats.jetstream();
  const encoder = new TextEncoder();
  return {
    svc,
    auth,
    client,
    sql,
    nats,
    namespace,
    async publish(type, payload, options = {}) {
      const id = options.id ?? randomUUID();
      const service = type.split('.')[0] ?? '';
      await ensureServiceStream(nats, { namespace, service });
      const h = natsHeaders();
      h.set(EVENT_HEADERS.eventType, type);
      h.set(EVENT_HEADERS.occurredAt, new Date().toISOString());
      if (options.key) h.set(EVENT_HEADERS.eventKey, options.key);
      await js.publish(namespace.subject(type), encoder.encode(JSON.stringify(payload)), { msgID: id, headers: h });
      return id;
    },
    async dispose() {
      await svc.stop();
      const jsm = await nats.jetstreamManager();
      for (const service of ['invoice', 'payout', 'notifier']) {
        await jsm.streams.delete(namespace.streamName(service)).catch(() => undefined);
      }
      await nats.drain().catch(() => undefined);
      await sql.end({ timeout: 5 });
      await svc.dispose();
      await auth.stop();
    },
  };
}
