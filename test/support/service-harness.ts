/**
 * What every service test harness holds besides its RPC client: the service started in-process, a
 * pool on its schema, NATS and its event namespace, a publisher that acts as another service's
 * outbox relay, and one `dispose` that tears it all down in order.
 */
import type { JsonValue } from '@bufbuild/protobuf';
import { connectNats, createDb, createLogger, ensureServiceStream, EVENT_HEADERS, EventNamespace, type Sql } from '@coinvoice/runtime';
import { headers as natsHeaders, type NatsConnection } from 'nats';
import { signInto, testEventKeys } from './event-keys';
import { testNatsUrl } from './infra';
import type { TestService } from './service';

export interface PublishedEvent {
  id: string;
  /** "<service>.<name>", e.g. invoice.paid. */
  type: string;
  payload: JsonValue;
  key?: string;
  occurredAt?: Date;
}

export interface ServiceHarnessBase {
  svc: TestService;
  /** A pool on the service's schema. */
  sql: Sql;
  nats: NatsConnection;
  namespace: EventNamespace;
  /**
   * Publishes an event as a service's outbox relay does: on its service's stream (created if
   * need be), msgID = event id, event-type header, event-key and occurred-at headers when given,
   * signed with that service's test key.
   */
  publishEvent(event: PublishedEvent): Promise<void>;
  /** Stops the service, deletes the streams named at open, closes NATS and the pool, drops the database. */
  dispose(): Promise<void>;
}

export async function openServiceHarness(
  svc: TestService,
  options: {
    schema: string;
    poolSize: number;
    /** The NATS connection's name, e.g. "payout-test". */
    natsName: string;
    /** Services whose streams in the namespace `dispose` deletes (none when the namespace is shared). */
    streams: readonly string[];
  },
): Promise<ServiceHarnessBase> {
  const sql = createDb({ url: svc.database.url, schema: options.schema, max: options.poolSize });
  const nats = await connectNats({ url: testNatsUrl(), name: options.natsName, logger: createLogger({ service: 'test', level: 'silent' }) });
  const namespace = new EventNamespace(svc.namespace);
  const encoder = new TextEncoder();
  return {
    svc,
    sql,
    nats,
    namespace,
    async publishEvent(event) {
      await ensureServiceStream(nats, { namespace, service: event.type.split('.')[0] ?? '' });
      const h = natsHeaders();
      h.set(EVENT_HEADERS.eventType, event.type);
      if (event.occurredAt) h.set(EVENT_HEADERS.occurredAt, event.occurredAt.toISOString());
      if (event.key) h.set(EVENT_HEADERS.eventKey, event.key);
      const subject = namespace.subject(event.type);
      const body = encoder.encode(JSON.stringify(event.payload));
      signInto(h, testEventKeys(), subject, event.id, body);
      await nats.jetstream().publish(subject, body, { msgID: event.id, headers: h });
    },
    async dispose() {
      await svc.stop();
      if (options.streams.length > 0) {
        const jsm = await nats.jetstreamManager();
        for (const service of options.streams) await jsm.streams.delete(namespace.streamName(service)).catch(() => undefined);
      }
      await nats.drain().catch(() => undefined);
      await sql.end({ timeout: 5 });
      await svc.dispose();
    },
  };
}
