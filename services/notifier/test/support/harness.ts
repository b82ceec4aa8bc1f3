/**
 * What the notifier service tests share: the notifier started in-process (fresh database, event
 * namespace of its own, real Postgres and NATS), a stand-in for the auth service's
 * GetProjectContext (a real gRPC server whose projects the test sets), a real HTTP receiver on
 * 127.0.0.1 whose answers the test scripts, and a publisher that puts events on the streams the
 * way the other services' outbox relays do.
 */
import { randomUUID } from 'node:crypto';
import type { JsonValue } from '@bufbuild/protobuf';
import type { Client } from '@connectrpc/connect';
import { createRpcClient } from '@coinvoice/runtime';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { AuthStandIn } from '../../../../test/support/auth-stand-in';
import { startTestService } from '../../../../test/support/service';
import { openServiceHarness, type ServiceHarnessBase } from '../../../../test/support/service-harness';
import { generateWebhookSecret } from '../../src/domain/signing';
import { notifierService } from '../../src/server';

export { eventually, Receiver, type ReceivedRequest, type Responder } from './receiver';

export interface FakeProject {
  webhookUrl?: string;
  webhookSecret: string;
  merchantEmail: string;
}

/** The auth stand-in, answering with each project's webhook settings and merchant email. */
export class FakeAuth extends AuthStandIn<FakeProject> {
  constructor() {
    super((projectId, project) => ({
      projectId,
      projectName: 'Test shop',
      environment: Environment.SANDBOX,
      merchantId: randomUUID(),
      merchantEmail: project.merchantEmail,
      webhookUrl: project.webhookUrl,
      webhookSecret: project.webhookSecret,
      invoiceLifetimeMinutes: 60,
    }));
  }

  addProject(project: Partial<FakeProject> = {}): { id: string } & FakeProject {
    const id = randomUUID();
    const full = { webhookSecret: generateWebhookSecret(), merchantEmail: `m-${id.slice(0, 8)}@example.com`, ...project };
    this.projects.set(id, full);
    return { id, ...full };
  }
}

export interface PublishOptions {
  id?: string;
  key?: string;
  /** The event-time header (when the producer wrote it); default now. */
  occurredAt?: Date;
}

/** The notifier's harness; `sql` is a pool on the notifier's schema. */
export interface Harness extends ServiceHarnessBase {
  auth: FakeAuth;
  client: Client<typeof NotifierService>;
  /** Publishes an event as a service's outbox relay does (msgID = event id, event-type and event-key headers). */
  publish(type: string, payload: JsonValue, options?: PublishOptions): Promise<string>;
  /**
   * Changes what auth answers for the project and publishes auth's signed `auth.project_updated`,
   * as the real auth does in the same transaction; resolves once the notifier had time to receive it.
   */
  updateProject(projectId: string, change: Partial<FakeProject>): Promise<void>;
}

export async function startNotifier(env: NodeJS.ProcessEnv = {}): Promise<Harness> {
  const auth = new FakeAuth();
  await auth.start();
  const svc = await startTestService(notifierService, {
    env: { AUTH_URL: auth.url, WEBHOOK_RETRY_SCHEDULE: '100ms,200ms', WEBHOOK_POLL_INTERVAL_MS: '500', ...env },
  });
  const client = createRpcClient(NotifierService, svc.url);
  const base = await openServiceHarness(svc, {
    schema: 'notifier',
    poolSize: 3,
    natsName: 'notifier-test',
    streams: ['invoice', 'payout', 'notifier', 'auth'],
  });
  return {
    ...base,
    auth,
    client,
    async publish(type, payload, options = {}) {
      const id = options.id ?? randomUUID();
      await base.publishEvent({ id, type, payload, key: options.key, occurredAt: options.occurredAt ?? new Date() });
      return id;
    },
    async updateProject(projectId, change) {
      const stored = auth.projects.get(projectId);
      if (!stored) throw new Error(`no project ${projectId}`);
      auth.projects.set(projectId, { ...stored, ...change });
      const payload = { projectId, merchantId: randomUUID(), name: 'Test shop', webhookSecretRotated: change.webhookSecret !== undefined };
      await base.publishEvent({ id: randomUUID(), type: 'auth.project_updated', payload, key: projectId });
      // A core subscription: the notifier has it once NATS routed it (a round trip on both connections).
      await base.nats.flush();
      await new Promise((resolve) => setTimeout(resolve, 50));
    },
    async dispose() {
      await base.dispose();
      await auth.stop();
    },
  };
}
