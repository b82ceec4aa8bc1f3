/** Reads back what was published on JetStream in a test's namespace. */
import { AckPolicy, connect, DeliverPolicy, nanos, type NatsConnection } from 'nats';
import { signInto, systemEventKeys } from './event-keys';
import { testNatsUrl } from './infra';

export interface PublishedEvent {
  id: string;
  type: string;
  payload: Record<string, unknown>;
}

export async function withNats<T>(fn: (nc: NatsConnection) => Promise<T>): Promise<T> {
  const nc = await connect({ servers: testNatsUrl() });
  try {
    return await fn(nc);
  } finally {
    await nc.close();
  }
}

/**
 * Every event of `type` (e.g. `invoice.paid`) in the owning service's stream of `namespace`,
 * waiting up to `waitMs` for at least `atLeast` of them (then returning all there are).
 */
export async function publishedEvents(namespace: string, type: string, options: { atLeast?: number; waitMs?: number } = {}): Promise<PublishedEvent[]> {
  const service = type.split('.')[0]!;
  const stream = `${namespace}_${service}`.toUpperCase();
  const subject = `${namespace}.${type}`;
  const deadline = Date.now() + (options.waitMs ?? 3_000);
  return withNats(async (nc) => {
    const jsm = await nc.jetstreamManager();
    for (;;) {
      const info = await jsm.streams.info(stream, { subjects_filter: subject }).catch(() => undefined);
      const count = info?.state.subjects?.[subject] ?? 0;
      if (count >= (options.atLeast ?? 1) || Date.now() >= deadline) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const out: PublishedEvent[] = [];
    const info = await jsm.streams.info(stream, { subjects_filter: subject }).catch(() => undefined);
    const expected = info?.state.subjects?.[subject] ?? 0;
    if (expected === 0) return out;
    // An ephemeral pull consumer of our own that reads the subject from the start, unacknowledged.
    const created = await jsm.consumers.add(stream, {
      filter_subject: subject,
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.All,
      inactive_threshold: nanos(30_000),
    });
    const consumer = await nc.jetstream().consumers.get(stream, created.name);
    while (out.length < expected) {
      const batch = await consumer.fetch({ max_messages: expected - out.length, expires: 2_000 });
      let got = 0;
      for await (const m of batch) {
        got++;
        out.push({ id: m.headers?.get('Nats-Msg-Id') ?? '', type, payload: m.json<Record<string, unknown>>() });
      }
      if (got === 0) break;
    }
    await jsm.consumers.delete(stream, created.name).catch(() => undefined);
    return out;
  });
}

/**
 * Credits a LIVE balance as a confirmed on-chain payment would: an `invoice.paid` published on the
 * invoice stream exactly as the invoice service's outbox relay publishes it, signed with the
 * system's invoice key (the launcher's, in its data folder). End-to-end tests have
 * no chain to pay live invoices on; operator actions need live payouts (sandbox ones complete by
 * themselves).
 */
export async function publishLivePayment(
  system: { namespace: string; dataDir: string },
  payment: { projectId: string; currency: string; amount: string },
): Promise<string> {
  const { randomUUID } = await import('node:crypto');
  const { headers } = await import('nats');
  const invoiceId = randomUUID();
  const payload = {
    invoiceId,
    projectId: payment.projectId,
    status: 'Paid',
    amount: payment.amount,
    currency: payment.currency,
    environment: 'live',
    transactionHash: randomUUID().replace(/-/g, '').repeat(2),
    paidAt: new Date().toISOString(),
  };
  await withNats(async (nc) => {
    const h = headers();
    h.set('event-type', 'invoice.paid');
    h.set('event-key', invoiceId);
    h.set('event-time', new Date().toISOString());
    const subject = `${system.namespace}.invoice.paid`;
    const body = new TextEncoder().encode(JSON.stringify(payload));
    const id = randomUUID();
    await nc.jetstream().publish(subject, body, { msgID: id, headers: signInto(h, systemEventKeys(system), subject, id, body) });
  });
  return invoiceId;
}
