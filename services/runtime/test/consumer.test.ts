/**
 * Idempotent consumers against real Postgres and a real NATS JetStream: this file has its own
 * database and event namespace. The "effect" under test is a row in `credits` with no unique
 * key, so applying an event twice would show as two rows.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { headers as natsHeaders, nanos, type JetStreamManager, type MsgHdrs, type NatsConnection } from 'nats';
import { Registry } from 'prom-client';
import { createDb, type Sql } from '../src/db';
import { connectNats, ensureStream, EventNamespace } from '../src/events/bus';
import { IdempotentConsumer, type ConsumedEvent, type EventHandler, type IdempotentConsumerOptions, type StatementHandler } from '../src/events/consumer';
import { EventVerifier, parseVerifyKeys, SIGNATURE_HEADER } from '../src/events/signing';
import { DEAD_LETTER_EVENTS_DDL, EVENT_TABLES_DDL } from '../src/events/tables';
import { createLogger, currentRequestId } from '../src/log';
import { migrate } from '../src/migrations';
import { signInto, testEventKeys } from '../../../test/support/event-keys';
import { createTestDatabase, testNatsUrl, uniqueName, type TestDatabase } from '../../../test/support/infra';
import { recordingPool } from '../../../test/support/statements';
import { JsMsgImpl } from 'nats/lib/jetstream/jsmsg';

const SCHEMA = 'payout';
const logger = createLogger({ service: 'consumer-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' });

let database: TestDatabase;
let sql: Sql;
let nats: NatsConnection;
let jsm: JetStreamManager;
let namespace: EventNamespace;
let migrationsDir: string;
const streams: string[] = [];
const consumers: IdempotentConsumer[] = [];
/** The consumers' verifier: every test service's public key (test/support/event-keys.ts); its refusals counted here. */
const metrics = new Registry();
const verifier = new EventVerifier(parseVerifyKeys(testEventKeys().verifyKeys) ?? new Map(), metrics);

/** Publishes as the producer's outbox relay does: signed with the producer's key over subject, id and body. */
async function publishSigned(subject: string, body: string, msgID: string, headers: MsgHdrs = natsHeaders()): Promise<{ seq: number; duplicate: boolean }> {
  const bytes = new TextEncoder().encode(body);
  const ack = await nats.jetstream().publish(subject, bytes, { msgID, headers: signInto(headers, testEventKeys(), subject, msgID, bytes) });
  return { seq: ack.seq, duplicate: ack.duplicate };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** A stream of its own per test (durable consumers and messages do not leak between tests). */
async function newStream(options: { duplicateWindowMs?: number } = {}): Promise<{ stream: string; ns: EventNamespace }> {
  const ns = new EventNamespace(uniqueName(namespace.name));
  const info = await ensureStream(jsm, { namespace: ns, service: 'invoice', ...options });
  streams.push(info.config.name);
  return { stream: info.config.name, ns };
}

/** Publishes an `invoice.paid` event the way the outbox relay does. */
async function publishPaid(
  ns: EventNamespace,
  event: { id: string; invoiceId: string; amount: string; requestId?: string },
): Promise<{ seq: number; duplicate: boolean }> {
  const headers = natsHeaders();
  headers.set('event-type', 'invoice.paid');
  if (event.requestId) headers.set('x-request-id', event.requestId);
  return publishSigned(ns.subject('invoice.paid'), JSON.stringify({ invoiceId: event.invoiceId, amount: event.amount }), event.id, headers);
}

/** The effect: credit the invoice's amount, in the consumer's transaction. */
const creditHandler: EventHandler = async (tx, event) => {
  const payload = event.payload as { invoiceId: string; amount: string };
  await tx`insert into credits (event_id, invoice_id, amount) values (${event.id}, ${payload.invoiceId}, ${payload.amount})`;
};

function newConsumer(
  stream: string,
  ns: EventNamespace,
  options: Partial<IdempotentConsumerOptions> = {},
): IdempotentConsumer {
  const consumer = new IdempotentConsumer({
    sql,
    nats,
    stream,
    name: 'payout-ledger',
    filterSubjects: [ns.subject('invoice.paid')],
    handler: creditHandler,
    verifier,
    logger,
    pullExpiresMs: 1000,
    retry: { initialMs: 50, maxMs: 200 },
    ...options,
  });
  consumers.push(consumer);
  return consumer;
}

async function credits(invoiceId: string): Promise<{ event_id: string; amount: string }[]> {
  return sql<{ event_id: string; amount: string }[]>`
    select event_id, amount from credits where invoice_id = ${invoiceId} order by id`;
}

/** The durable consumer has nothing pending and nothing waiting for an ack. */
async function settled(stream: string): Promise<boolean> {
  const info = await jsm.consumers.info(stream, 'payout-ledger');
  return info.num_pending === 0 && info.num_ack_pending === 0;
}

beforeAll(async () => {
  database = await createTestDatabase('cvconsumer');
  sql = createDb({ url: database.url, schema: SCHEMA, max: 5 });
  migrationsDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-consumer-'));
  writeFileSync(
    path.join(migrationsDir, '0001_init.sql'),
    `${EVENT_TABLES_DDL}
${DEAD_LETTER_EVENTS_DDL}
create table credits (
  id         bigint generated always as identity primary key,
  event_id   text not null,
  invoice_id text not null,
  amount     numeric(30, 8) not null
);`,
  );
  await migrate(sql, { schema: SCHEMA, dir: migrationsDir });
  nats = await connectNats({ url: testNatsUrl(), name: 'consumer-test', logger });
  jsm = await nats.jetstreamManager();
  namespace = new EventNamespace(uniqueName('consumer'));
});

afterEach(async () => {
  await Promise.all(consumers.splice(0).map((consumer) => consumer.stop()));
});

afterAll(async () => {
  await Promise.all(consumers.map((consumer) => consumer.stop()));
  for (const stream of streams) await jsm?.streams.delete(stream).catch(() => undefined);
  await nats?.close();
  await sql?.end({ timeout: 5 });
  await database?.drop();
  if (migrationsDir) rmSync(migrationsDir, { recursive: true, force: true });
});

describe('IdempotentConsumer', () => {
  it('applies an event stored twice in the stream once, also with two replicas consuming', async () => {
    // A short duplicate window lets the same event id into the stream twice, as a relay
    // re-publishing after a long outage would.
    const { stream, ns } = await newStream({ duplicateWindowMs: 100 });
    const id = 'evt-dup-1';
    const first = await publishPaid(ns, { id, invoiceId: 'inv_dup', amount: '12.50000000' });
    await sleep(250);
    const second = await publishPaid(ns, { id, invoiceId: 'inv_dup', amount: '12.50000000' });
    expect(second).toEqual({ seq: first.seq + 1, duplicate: false });

    const seen: ConsumedEvent[] = [];
    const handler: EventHandler = async (tx, event) => {
      seen.push(event);
      await creditHandler(tx, event);
    };
    await Promise.all([newConsumer(stream, ns, { handler }).start(), newConsumer(stream, ns, { handler }).start()]);

    await waitFor('both deliveries to be acked', () => settled(stream));
    expect(await credits('inv_dup')).toEqual([{ event_id: id, amount: '12.50000000' }]);
    expect(seen).toHaveLength(1);
    expect(await sql`select consumer_name, event_id from processed_events`).toEqual([
      { consumer_name: 'payout-ledger', event_id: id },
    ]);
  });

  it('acknowledges event types it does not handle without a transaction or a processed_events row', async () => {
    const { stream, ns } = await newStream();
    const created = natsHeaders();
    created.set('event-type', 'invoice.created');
    await publishSigned(ns.subject('invoice.created'), JSON.stringify({ invoiceId: 'inv_new' }), 'evt-created-1', created);
    await publishPaid(ns, { id: 'evt-paid-1', invoiceId: 'inv_paid', amount: '1.00000000' });
    const seen: string[] = [];
    const handler: EventHandler = async (tx, event) => {
      seen.push(event.type);
      await creditHandler(tx, event);
    };
    await newConsumer(stream, ns, {
      handler,
      filterSubjects: [`${ns.name}.invoice.>`],
      handles: (type) => type === 'invoice.paid',
    }).start();
    await waitFor('both messages to be acked', () => settled(stream));
    expect(seen).toEqual(['invoice.paid']);
    expect(await sql`select event_id from processed_events where event_id in ('evt-created-1', 'evt-paid-1')`).toEqual([{ event_id: 'evt-paid-1' }]);
  });

  it('acks a type it never acts on by its subject alone: no signature check, no parse, no dead letter', async () => {
    const { stream, ns } = await newStream();
    // Unsigned and not JSON: judged by its subject, it is never looked at.
    await nats.jetstream().publish(ns.subject('invoice.created'), new TextEncoder().encode('not json'), { msgID: 'evt-created-unsigned' });
    await publishPaid(ns, { id: 'evt-paid-after-created', invoiceId: 'inv_after_created', amount: '1.00000000' });
    const check = jest.spyOn(verifier, 'check');
    try {
      await newConsumer(stream, ns, { filterSubjects: [`${ns.name}.invoice.>`], handles: (type) => type === 'invoice.paid' }).start();
      await waitFor('both messages to be acked', () => settled(stream));
      expect(check.mock.calls.map((call) => call[1])).toEqual([ns.subject('invoice.paid')]);
    } finally {
      check.mockRestore();
    }
    expect(await sql`select event_id from dead_letter_events where stream = ${stream}`).toEqual([]);
    expect((await credits('inv_after_created')).map((c) => c.amount)).toEqual(['1.00000000']);
  });

  it('applies an event redelivered after a crash between commit and ack once', async () => {
    const { stream, ns } = await newStream();
    const deliveries: number[] = [];
    let handled = 0;
    const consumer = newConsumer(stream, ns, {
      handler: async (tx, event) => {
        handled += 1;
        await creditHandler(tx, event);
      },
      afterCommit: (event) => {
        deliveries.push(event.deliveryCount);
        // The first time, die after the commit and before the ack: JetStream delivers it again.
        if (deliveries.length === 1) throw new Error('simulated crash between commit and ack');
      },
    });
    await consumer.start();
    await publishPaid(ns, { id: 'evt-crash-1', invoiceId: 'inv_crash', amount: '1.00000000' });

    await waitFor('the redelivery to be acked', async () => deliveries.length >= 2 && (await settled(stream)));
    expect(deliveries).toEqual([1, 2]);
    expect(handled).toBe(1);
    expect(await credits('inv_crash')).toHaveLength(1);
  });

  it('retries a failing handler with its effect rolled back each time, and the effect lands once', async () => {
    const { stream, ns } = await newStream();
    const attempts: { delivery: number; requestId: string | undefined; at: number }[] = [];
    const consumer = newConsumer(stream, ns, {
      handler: async (tx, event) => {
        attempts.push({ delivery: event.deliveryCount, requestId: currentRequestId(), at: Date.now() });
        // The effect is written before the failure: only the rollback keeps it from counting.
        await creditHandler(tx, event);
        if (attempts.length < 3) throw new Error(`downstream unavailable (attempt ${attempts.length})`);
      },
    });
    await consumer.start();
    await publishPaid(ns, { id: 'evt-retry-1', invoiceId: 'inv_retry', amount: '3.00000000', requestId: 'req-from-gateway' });

    await waitFor('the third attempt to be acked', async () => attempts.length >= 3 && (await settled(stream)));
    expect(attempts.map((a) => a.delivery)).toEqual([1, 2, 3]);
    // The request id of the work that produced the event is the one in force while handling it.
    expect(attempts.map((a) => a.requestId)).toEqual(['req-from-gateway', 'req-from-gateway', 'req-from-gateway']);
    // nak with a growing delay: 50 ms, then 100 ms.
    const [a1, a2, a3] = attempts.map((a) => a.at);
    expect((a2 ?? 0) - (a1 ?? 0)).toBeGreaterThanOrEqual(40);
    expect((a3 ?? 0) - (a2 ?? 0)).toBeGreaterThanOrEqual(90);
    expect(await credits('inv_retry')).toHaveLength(1);
    await sleep(300);
    expect(attempts).toHaveLength(3);
  });

  it('stop() finishes and acks the event in hand, then takes no more', async () => {
    const { stream, ns } = await newStream();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const started: string[] = [];
    const consumer = newConsumer(stream, ns, {
      handler: async (tx, event) => {
        started.push(event.id);
        if (event.id === 'evt-slow') await released;
        await creditHandler(tx, event);
      },
    });
    await consumer.start();
    await publishPaid(ns, { id: 'evt-slow', invoiceId: 'inv_slow', amount: '5.00000000' });
    await waitFor('the slow handler to start', async () => started.includes('evt-slow'));

    let stopped = false;
    const stopping = consumer.stop().then(() => (stopped = true));
    await sleep(200);
    expect(stopped).toBe(false); // still finishing the event in hand
    release();
    await stopping;

    // Committed and acked before stop() resolved.
    expect(await credits('inv_slow')).toHaveLength(1);
    await waitFor('the ack to be recorded', () => settled(stream), 2000);

    // Stopped: a new event waits for the next replica.
    await publishPaid(ns, { id: 'evt-later', invoiceId: 'inv_later', amount: '1.00000000' });
    await sleep(1500);
    expect(started).toEqual(['evt-slow']);
    expect(await credits('inv_later')).toHaveLength(0);

    await newConsumer(stream, ns).start();
    await waitFor('the next replica to handle it', async () => (await credits('inv_later')).length === 1);
  });

  it('stop() while idle returns at once and strands no message sent right after', async () => {
    const { stream, ns } = await newStream();
    const idle = newConsumer(stream, ns, { pullExpiresMs: 20_000 });
    await idle.start();
    await sleep(200); // waiting on a long pull

    const started = Date.now();
    await idle.stop();
    expect(Date.now() - started).toBeLessThan(500);

    // Its pull request ended with it: the server must not hand this message to the stopped
    // replica (it would wait out ack_wait, 30 s here) but to the next one at once.
    await publishPaid(ns, { id: 'evt-after-idle-stop', invoiceId: 'inv_idle', amount: '4.00000000' });
    await newConsumer(stream, ns).start();
    await waitFor('the next replica to handle it', async () => (await credits('inv_idle')).length === 1, 5000);
  });

  it('terminates a message it can never handle and goes on with the next', async () => {
    const { stream, ns } = await newStream();
    await newConsumer(stream, ns).start();
    await publishSigned(ns.subject('invoice.paid'), 'not json', 'evt-garbage');
    await publishPaid(ns, { id: 'evt-good', invoiceId: 'inv_good', amount: '2.00000000' });

    await waitFor('the good event to be handled', async () => (await credits('inv_good')).length === 1);
    // Terminated, not left for redelivery after ack_wait.
    await waitFor('the stream to be settled', () => settled(stream), 3000);
    expect(await sql`select event_id from processed_events where event_id = 'evt-garbage'`).toHaveLength(0);
  });
});

describe('a lost stream (docs/architecture.md#a-lost-stream)', () => {
  it('the stream deleted under a running consumer: it creates the stream and its durable again and handles what is published after', async () => {
    const { stream, ns } = await newStream();
    const consumer = newConsumer(stream, ns, { restoreStream: () => ensureStream(jsm, { namespace: ns, service: 'invoice', reconfigure: false }) });
    await consumer.start();
    await publishPaid(ns, { id: 'evt-lost-1', invoiceId: 'inv_lost_1', amount: '1.00000000' });
    await waitFor('the first event credited', async () => (await credits('inv_lost_1')).length === 1);
    // A JetStream store wiped, or the stream deleted by hand.
    await jsm.streams.delete(stream);
    // At once: the pull pending at the deletion ends "consumer deleted" (409), and the consumer asks
    // the server whether its durable still exists rather than retry until a pull expires.
    await waitFor('the stream created again by the consumer', async () => jsm.streams.info(stream).then(() => true, () => false), 20_000);
    await publishPaid(ns, { id: 'evt-lost-2', invoiceId: 'inv_lost_2', amount: '2.00000000' });
    await waitFor('the event after the loss credited', async () => (await credits('inv_lost_2')).length === 1);
    expect(await credits('inv_lost_1')).toHaveLength(1);
  });
});

describe('IdempotentConsumer acts only on signed events', () => {
  /** events_rejected_total by reason, for this file's consumers. */
  async function rejected(): Promise<Record<string, number>> {
    const metric = await metrics.getSingleMetric('events_rejected_total')?.get();
    return Object.fromEntries((metric?.values ?? []).map((v) => [String(v.labels.reason), v.value]));
  }

  it('dead-letters (once), counts and terminates an event without a signature or with a wrong one; signed events around it are applied', async () => {
    const { stream, ns } = await newStream();
    const subject = ns.subject('invoice.paid');
    const paid = (invoiceId: string) => JSON.stringify({ invoiceId, amount: '1000.00000000' });
    await newConsumer(stream, ns).start();

    await publishPaid(ns, { id: 'evt-signed-before', invoiceId: 'inv_before', amount: '1.00000000' });
    // No signature at all.
    await nats.jetstream().publish(subject, paid('inv_unsigned'), { msgID: 'evt-unsigned' });
    // Not a signature.
    const garbage = natsHeaders();
    garbage.set(SIGNATURE_HEADER, Buffer.alloc(64, 7).toString('base64'));
    await nats.jetstream().publish(subject, paid('inv_garbage'), { msgID: 'evt-garbage-signature', headers: garbage });
    // Signed, but by another service's key (payout may not speak for invoice).
    const otherKey = natsHeaders();
    otherKey.set(SIGNATURE_HEADER, testEventKeys().signer('payout').sign(subject, 'evt-other-key', new TextEncoder().encode(paid('inv_other_key'))));
    await nats.jetstream().publish(subject, paid('inv_other_key'), { msgID: 'evt-other-key', headers: otherKey });
    // A real signature copied onto another id, and onto another body.
    const real = natsHeaders();
    real.set(SIGNATURE_HEADER, testEventKeys().signer('invoice').sign(subject, 'evt-original', new TextEncoder().encode(paid('inv_original'))));
    await nats.jetstream().publish(subject, paid('inv_original'), { msgID: 'evt-new-id', headers: real });
    await nats.jetstream().publish(subject, paid('inv_changed'), { msgID: 'evt-original', headers: real });
    await publishPaid(ns, { id: 'evt-signed-after', invoiceId: 'inv_after', amount: '2.00000000' });

    await waitFor('the signed event after them to be applied', async () => (await credits('inv_after')).length === 1);
    await waitFor('the stream to be settled (refused messages terminated, not redelivered)', () => settled(stream), 3000);
    expect((await credits('inv_before')).map((c) => c.amount)).toEqual(['1.00000000']);
    for (const invoiceId of ['inv_unsigned', 'inv_garbage', 'inv_other_key', 'inv_original', 'inv_changed']) expect(await credits(invoiceId)).toEqual([]);
    const dead = await sql<{ event_id: string; reason: string; subject: string; body: Buffer }[]>`
      select event_id, reason, subject, body from dead_letter_events where stream = ${stream} order by stream_sequence`;
    expect(dead.map((row) => ({ eventId: row.event_id, reason: row.reason, subject: row.subject }))).toEqual([
      { eventId: 'evt-unsigned', reason: 'missing_signature', subject },
      { eventId: 'evt-garbage-signature', reason: 'bad_signature', subject },
      { eventId: 'evt-other-key', reason: 'bad_signature', subject },
      { eventId: 'evt-new-id', reason: 'bad_signature', subject },
      { eventId: 'evt-original', reason: 'bad_signature', subject },
    ]);
    expect(dead[0]?.body.toString()).toBe(paid('inv_unsigned'));
    expect(await rejected()).toMatchObject({ missing_signature: 1, bad_signature: 4 });
    expect(await sql`select event_id from processed_events where event_id in ('evt-unsigned', 'evt-garbage-signature', 'evt-other-key', 'evt-new-id', 'evt-original')`).toHaveLength(0);
  });

  it('refuses to start without a key of the producer it reads', () => {
    const ns = new EventNamespace(uniqueName(namespace.name));
    const onlyPayout = new EventVerifier(parseVerifyKeys(`payout=${testEventKeys().signer('payout').publicKey}`) ?? new Map());
    expect(() => newConsumer(ns.streamName('invoice'), ns, { verifier: onlyPayout })).toThrow('EVENT_VERIFY_KEYS has no key of invoice, whose events consumer payout-ledger reads');
  });

  it('accepts every key listed for a producer (rotation: events signed with the old and the new key)', async () => {
    const { stream, ns } = await newStream();
    const keys = testEventKeys();
    // "invoice" rotates from its key to payout's (any second key will do): both listed.
    const rotating = new EventVerifier(parseVerifyKeys(`invoice=${keys.signer('invoice').publicKey},invoice=${keys.signer('payout').publicKey}`) ?? new Map());
    await newConsumer(stream, ns, { verifier: rotating }).start();
    const subject = ns.subject('invoice.paid');
    for (const [id, signer] of [['evt-old-key', 'invoice'], ['evt-new-key', 'payout']] as const) {
      const body = new TextEncoder().encode(JSON.stringify({ invoiceId: `inv_${id}`, amount: '3.00000000' }));
      const h = natsHeaders();
      h.set(SIGNATURE_HEADER, keys.signer(signer).sign(subject, id, body));
      await nats.jetstream().publish(subject, body, { msgID: id, headers: h });
    }
    await waitFor('both to be applied', async () => (await credits('inv_evt-old-key')).length === 1 && (await credits('inv_evt-new-key')).length === 1);
  });
});

describe('ensureStream', () => {
  it('keeps events 30 days by default on one replica, and brings an existing stream to the configured age', async () => {
    const { stream, ns } = await newStream();
    const created = await jsm.streams.info(stream);
    expect(created.config.max_age).toBe(nanos(30 * 86_400_000));
    expect(created.config.num_replicas).toBe(1);
    const updated = await ensureStream(jsm, { namespace: ns, service: 'invoice', maxAgeMs: 2 * 3_600_000, replicas: 1 });
    expect(updated.config.max_age).toBe(nanos(2 * 3_600_000));
    expect((await jsm.streams.info(stream)).config.max_age).toBe(nanos(2 * 3_600_000));
  });

  it("a consumer's call (reconfigure: false) leaves an existing stream as its owner made it, and creates a missing one", async () => {
    const { stream, ns } = await newStream();
    const seen = await ensureStream(jsm, { namespace: ns, service: 'invoice', maxAgeMs: 2 * 3_600_000, reconfigure: false });
    expect(seen.config.max_age).toBe(nanos(30 * 86_400_000));
    expect((await jsm.streams.info(stream)).config.max_age).toBe(nanos(30 * 86_400_000));
    const created = await ensureStream(jsm, { namespace: ns, service: 'payout', maxAgeMs: 3_600_000, reconfigure: false });
    expect(created.config.max_age).toBe(nanos(3_600_000));
    await jsm.streams.delete(created.config.name);
  });
});

describe('IdempotentConsumer pulls in batches', () => {
  it('asks for many messages per pull request, and applies every event once, in order per invoice', async () => {
    const { stream, ns } = await newStream();
    const INVOICES = 10;
    const PER_INVOICE = 20;
    // Every pull request the consumer makes, as the server receives it.
    const pullRequests: number[] = [];
    const watcher = nats.subscribe(`$JS.API.CONSUMER.MSG.NEXT.${stream}.payout-ledger`, {
      callback: (_err, msg) => pullRequests.push((JSON.parse(new TextDecoder().decode(msg.data)) as { batch: number }).batch),
    });
    // Interleaved: invoice 0 event 0, invoice 1 event 0, …, invoice 0 event 1, …
    for (let step = 0; step < PER_INVOICE; step++) {
      await Promise.all(
        Array.from({ length: INVOICES }, (_, invoice) =>
          publishPaid(ns, { id: `evt-b-${invoice}-${step}`, invoiceId: `inv_b_${invoice}`, amount: `${step + 1}.00000000` }),
        ),
      );
    }
    const seen = new Map<string, number[]>();
    const consumer = newConsumer(stream, ns, {
      batchSize: 16,
      handler: async (tx, event) => {
        const payload = event.payload as { invoiceId: string; amount: string };
        seen.set(payload.invoiceId, [...(seen.get(payload.invoiceId) ?? []), Number(payload.amount)]);
        await creditHandler(tx, event);
      },
    });
    await consumer.start();
    await waitFor('every event to be handled', async () => {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from credits where starts_with(invoice_id, 'inv_b_')`;
      return row?.n === INVOICES * PER_INVOICE;
    }, 30_000);
    await waitFor('the stream to be settled', () => settled(stream), 5_000);
    watcher.unsubscribe();

    // In order per invoice, each once.
    for (let invoice = 0; invoice < INVOICES; invoice++) {
      expect(seen.get(`inv_b_${invoice}`)).toEqual(Array.from({ length: PER_INVOICE }, (_, step) => step + 1));
      expect((await credits(`inv_b_${invoice}`)).map((c) => Number(c.amount))).toEqual(Array.from({ length: PER_INVOICE }, (_, step) => step + 1));
    }
    // 200 events through pull requests of 16: ~13 of them, not 200 of one.
    expect(pullRequests.every((batch) => batch === 16)).toBe(true);
    expect(pullRequests.length).toBeLessThanOrEqual(Math.ceil((INVOICES * PER_INVOICE) / 16) + 3);
  });

  async function applyGroup(prefix: string, handler: EventHandler): Promise<void> {
    const { stream, ns } = await newStream();
    for (let i = 0; i < 24; i++) await publishPaid(ns, { id: `evt-${prefix}-${i}`, invoiceId: `inv_${prefix}_${i}`, amount: '1.00000000' });
    await newConsumer(stream, ns, { batchSize: 24, retry: { initialMs: 50, maxMs: 50 }, handler, groupTransactions: true }).start();
    await waitFor('every event applied', async () => {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from credits where starts_with(invoice_id, ${`inv_${prefix}_`})`;
      return row?.n === 24;
    }, 15_000);
    await waitFor('the stream to be settled', () => settled(stream), 5_000);
    for (let i = 0; i < 24; i++) expect((await credits(`inv_${prefix}_${i}`)).map((c) => c.amount)).toEqual(['1.00000000']);
  }

  it('events that arrive together commit together: one transaction per group, each event applied once', async () => {
    await applyGroup('g', creditHandler);
    // processed_at is the transaction's start: a group's events share it.
    const transactions = await sql<{ n: number }[]>`
      select count(*)::int as n from processed_events where starts_with(event_id, 'evt-g-') group by processed_at`;
    expect(transactions.length).toBeLessThan(24);
    expect(Math.max(...transactions.map((t) => t.n))).toBeGreaterThan(1);
  });

  it("a group's acks are sent in one pass: nats.js writes them to the socket together, not one write per event", async () => {
    // nats.js flushes what was queued when the microtask queue next runs: acks queued with no
    // await between them share one flush (one socket write); an await between two acks split them.
    const flushes: number[] = [];
    let open: number | undefined;
    const ack = jest.spyOn(JsMsgImpl.prototype, 'ack');
    ack.mockImplementation(function (this: JsMsgImpl) {
      if (open === undefined) {
        open = flushes.length;
        flushes.push(0);
        queueMicrotask(() => (open = undefined));
      }
      flushes[open]! += 1;
      this.doAck(new TextEncoder().encode('+ACK'));
    });
    try {
      await applyGroup('acks', creditHandler);
    } finally {
      ack.mockRestore();
    }
    expect(flushes.reduce((sum, n) => sum + n, 0)).toBe(24);
    // 24 acks in a few groups: as many flushes as groups, the biggest carrying several acks.
    expect(flushes.length).toBeLessThan(12);
    expect(Math.max(...flushes)).toBeGreaterThan(1);
  });

  it('a handler failing inside a group rolls the group back; each of its events is then handled alone, each applied once', async () => {
    let failures = 0;
    await applyGroup('f', async (tx, event) => {
      if (event.id === 'evt-f-6' && failures++ === 0) throw new Error('a handler failure');
      await creditHandler(tx, event);
    });
    // evt-f-6 was handled twice: in its group (failing, rolled back), then alone (applied).
    expect(failures).toBe(2);
  });

  it('a groupHandler is given the events of a group together, in delivery order, each once', async () => {
    const { stream, ns } = await newStream();
    const ids = Array.from({ length: 24 }, (_, i) => `evt-gh-${i}`);
    for (const [i, id] of ids.entries()) await publishPaid(ns, { id, invoiceId: `inv_gh_${i}`, amount: '1.00000000' });
    const groups: string[][] = [];
    await newConsumer(stream, ns, {
      batchSize: 24,
      groupTransactions: true,
      handler: undefined,
      groupHandler: async (tx, events) => {
        groups.push(events.map((event) => event.id));
        for (const event of events) await creditHandler(tx, event);
      },
    }).start();
    await waitFor('the stream to be settled', () => settled(stream), 10_000);
    expect(groups.flat()).toEqual(ids);
    expect(Math.max(...groups.map((group) => group.length))).toBeGreaterThan(1);
    for (let i = 0; i < 24; i++) expect((await credits(`inv_gh_${i}`)).map((c) => c.amount)).toEqual(['1.00000000']);
  });

  it('stop() in the middle of a batch hands the rest back at once: the next replica gets them without waiting for ack_wait', async () => {
    const { stream, ns } = await newStream();
    for (let i = 0; i < 10; i++) await publishPaid(ns, { id: `evt-s-${i}`, invoiceId: `inv_s_${i}`, amount: '1.00000000' });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const handled: string[] = [];
    const first = newConsumer(stream, ns, {
      batchSize: 10,
      ackWaitMs: 30_000,
      groupTransactions: true,
      handler: async (tx, event) => {
        handled.push(event.id);
        if (event.id === 'evt-s-0') await released;
        await creditHandler(tx, event);
      },
    });
    await first.start();
    await waitFor('the first event to be in hand', async () => handled.includes('evt-s-0'));
    const stopping = first.stop();
    release();
    await stopping;
    expect(handled).toEqual(['evt-s-0']); // the other nine were received with it, and given back

    const started = Date.now();
    await newConsumer(stream, ns).start();
    await waitFor('the next replica to handle the other nine', async () => {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from credits where starts_with(invoice_id, 'inv_s_')`;
      return row?.n === 10;
    }, 10_000);
    expect(Date.now() - started).toBeLessThan(10_000); // not ack_wait (30 s)
  });
});

describe('IdempotentConsumer ack wait (docs/architecture.md#ack-wait)', () => {
  it('a replica killed holding messages: the next gets them within the default ack_wait (5 s), not 30 s', async () => {
    const { stream, ns } = await newStream();
    for (let i = 0; i < 10; i++) await publishPaid(ns, { id: `evt-k-${i}`, invoiceId: `inv_k_${i}`, amount: '1.00000000' });
    // The replica that dies has its own connections, as a process does.
    const doomedNats = await connectNats({ url: testNatsUrl(), name: 'consumer-test-doomed', logger });
    const doomedSql = createDb({ url: database.url, schema: SCHEMA, max: 1 });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const inHand: string[] = [];
    const doomed = newConsumer(stream, ns, {
      nats: doomedNats,
      sql: doomedSql,
      batchSize: 10,
      handler: async (tx, event) => {
        inHand.push(event.id);
        await released;
        await creditHandler(tx, event);
      },
    });
    await doomed.start();
    await waitFor('the first event to be in hand', async () => inHand.includes('evt-k-0'));
    // Killed: its connections drop; its open transaction rolls back; it acks nothing.
    await doomedNats.close();
    await doomedSql.end({ timeout: 0 });

    const started = Date.now();
    const deliveries: number[] = [];
    await newConsumer(stream, ns, {
      handler: async (tx, event) => {
        deliveries.push(event.deliveryCount);
        await creditHandler(tx, event);
      },
    }).start();
    await waitFor('the next replica to credit all ten', async () => {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from credits where starts_with(invoice_id, 'inv_k_')`;
      return row?.n === 10;
    }, 20_000);
    const tookMs = Date.now() - started;
    release();
    expect(deliveries).toEqual(Array(10).fill(2)); // all ten were held by the dead replica
    expect(tookMs).toBeLessThan(8_000); // ack_wait (5 s) and a pull, not 30 s
    for (let i = 0; i < 10; i++) expect((await credits(`inv_k_${i}`)).map((c) => c.amount)).toEqual(['1.00000000']);
  });

  it.each([
    ['one at a time', false],
    ['grouped', true],
  ])('messages waiting behind a handler slower than ack_wait are kept alive: none redelivered to another replica (%s)', async (_, groupTransactions) => {
    const { stream, ns } = await newStream();
    const prefix = groupTransactions ? 'g' : 'o';
    const publish = (i: number) => publishPaid(ns, { id: `evt-w${prefix}-${i}`, invoiceId: `inv_w${prefix}_${i}`, amount: '1.00000000' });
    await publish(0);
    const deliveries: Array<{ id: string; count: number }> = [];
    const handler: EventHandler = async (tx, event) => {
      deliveries.push({ id: event.id, count: event.deliveryCount });
      if (event.id === `evt-w${prefix}-0`) await sleep(3_000); // three times ack_wait
      await creditHandler(tx, event);
    };
    const options = { ackWaitMs: 1_000, batchSize: 6, groupTransactions, handler };
    await newConsumer(stream, ns, options).start();
    await waitFor('the first event to be in hand', async () => deliveries.length > 0);
    // These reach the same pull and wait behind the slow one (grouped: in the next group).
    for (let i = 1; i < 6; i++) await publish(i);
    await sleep(100);
    // A second replica on the same durable gets whatever the first lets expire.
    await newConsumer(stream, ns, options).start();
    await waitFor('all six credited', async () => {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from credits where starts_with(invoice_id, ${`inv_w${prefix}_`})`;
      return row?.n === 6;
    }, 15_000);
    await waitFor('the stream to be settled', () => settled(stream), 5_000);
    expect(deliveries.filter((d) => d.count > 1)).toEqual([]);
  });
});

describe('IdempotentConsumer with a statementHandler (docs/performance.md#events)', () => {
  /** The credit and the claim in one statement: nothing is credited unless the claim returned its row. */
  const creditInOneStatement: StatementHandler = async (q, event, claim) => {
    const payload = event.payload as { invoiceId: string; amount: string };
    const [row] = await q<{ claimed: boolean }[]>`
      with claim as (${claim}),
      credit as (insert into credits (event_id, invoice_id, amount) select ${event.id}, ${payload.invoiceId}, ${payload.amount} from claim)
      select exists (select from claim) as claimed`;
    return row?.claimed === true;
  };

  it('claims and applies each event in ONE statement, with no transaction; an event stored twice is applied once', async () => {
    const { stream, ns } = await newStream({ duplicateWindowMs: 100 });
    await publishPaid(ns, { id: 'evt-stmt-1', invoiceId: 'inv_stmt', amount: '2.00000000' });
    await sleep(250);
    await publishPaid(ns, { id: 'evt-stmt-1', invoiceId: 'inv_stmt', amount: '2.00000000' }); // the same event again
    await publishPaid(ns, { id: 'evt-stmt-2', invoiceId: 'inv_stmt', amount: '3.00000000' });
    const recorder = await recordingPool(database.url, SCHEMA);
    const { statements } = recorder;
    try {
      await newConsumer(stream, ns, { sql: recorder.sql, handler: undefined, statementHandler: creditInOneStatement }).start();
      await waitFor('the three messages to be acked', () => settled(stream));
      expect(await credits('inv_stmt')).toEqual([
        { event_id: 'evt-stmt-1', amount: '2.00000000' },
        { event_id: 'evt-stmt-2', amount: '3.00000000' },
      ]);
      expect(statements).toHaveLength(3);
      expect(statements.filter((query) => /^\s*(begin|commit|rollback)/i.test(query))).toEqual([]);
    } finally {
      await Promise.all(consumers.splice(0).map((consumer) => consumer.stop()));
      await recorder.end();
    }
  });

  it('a statement that fails changes nothing: the event comes again and is applied once', async () => {
    const { stream, ns } = await newStream();
    await publishPaid(ns, { id: 'evt-stmt-fail', invoiceId: 'inv_stmt_fail', amount: '4.00000000' });
    let calls = 0;
    const failingFirst: StatementHandler = async (q, event, claim) => {
      calls += 1;
      if (calls === 1) {
        // The claim runs, then the statement fails: it must not stay claimed.
        await q`with claim as (${claim}) select 1 / (select count(*) - 1 from claim)`;
      }
      return creditInOneStatement(q, event, claim);
    };
    await newConsumer(stream, ns, { handler: undefined, statementHandler: failingFirst }).start();
    await waitFor('the message to be acked', () => settled(stream));
    expect(calls).toBe(2);
    expect(await credits('inv_stmt_fail')).toEqual([{ event_id: 'evt-stmt-fail', amount: '4.00000000' }]);
  });

  it('takes exactly one of handler, groupHandler and statementHandler, and no group with a statement', () => {
    const { name } = namespace;
    const base = { sql, nats, stream: 'S', name: 'c', filterSubjects: [`${name}.invoice.paid`], verifier, logger };
    expect(() => new IdempotentConsumer({ ...base })).toThrow(/exactly one of handler, groupHandler and statementHandler/);
    expect(() => new IdempotentConsumer({ ...base, handler: creditHandler, groupHandler: async () => undefined })).toThrow(/exactly one/);
    expect(() => new IdempotentConsumer({ ...base, handler: creditHandler, statementHandler: creditInOneStatement })).toThrow(/exactly one/);
    expect(() => new IdempotentConsumer({ ...base, statementHandler: creditInOneStatement, groupTransactions: true })).toThrow(/no transaction to group/);
  });
});
