/**
 * The transactional outbox against real Postgres and a real NATS JetStream: this file has its own
 * database and its own event namespace (so its own stream).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { JetStreamManager, NatsConnection } from 'nats';
import { createDb, type Sql } from '../src/db';
import { connectNats, ensureStream, EventNamespace } from '../src/events/bus';
import { enqueueEvent, enqueueEvents, eventTransaction, OutboxRelay, type OutboxRelayOptions } from '../src/events/outbox';
import { BATCH_SIGNATURE_HEADER, EventVerifier, parseVerifyKeys, SIGNATURE_HEADER } from '../src/events/signing';
import { headers as natsHeaders } from 'nats';
import { EVENT_TABLES_DDL } from '../src/events/tables';
import { registerOutboxMetrics } from '../src/events/outbox-metrics';
import { Registry } from 'prom-client';
import { createLogger, withRequestId } from '../src/log';
import { migrate } from '../src/migrations';
import { testEventKeys } from '../../../test/support/event-keys';
import { createTestDatabase, testNatsUrl, uniqueName, type TestDatabase } from '../../../test/support/infra';

const SCHEMA = 'invoice';
const logger = createLogger({ service: 'outbox-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' });

let database: TestDatabase;
let sql: Sql;
let nats: NatsConnection;
let jsm: JetStreamManager;
let namespace: EventNamespace;
let stream: string;
let migrationsDir: string;
const pools: Sql[] = [];
const relays: OutboxRelay[] = [];
const extraStreams: string[] = [];

/** A separate pool, as another replica (or a relay we can kill) would have. */
function newPool(): Sql {
  const pool = createDb({ url: database.url, schema: SCHEMA, max: 3 });
  pools.push(pool);
  return pool;
}

function newRelay(options: Partial<OutboxRelayOptions> = {}): OutboxRelay {
  const relay = new OutboxRelay({
    sql,
    nats,
    namespace,
    signer: testEventKeys().signer('invoice'),
    logger,
    pollIntervalMs: 200,
    retry: { initialMs: 50, maxMs: 200 },
    ...options,
  });
  relays.push(relay);
  return relay;
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

interface StoredEvent {
  streamSeq: number;
  msgId: string | undefined;
  subject: string;
  eventType: string | undefined;
  requestId: string | undefined;
  eventKey: string | undefined;
  payload: unknown;
}

/** Every message the stream holds, in stream order. */
async function storedEvents(streamName = stream): Promise<StoredEvent[]> {
  const { state } = await jsm.streams.info(streamName);
  const events: StoredEvent[] = [];
  if (state.messages === 0) return events;
  for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
    const msg = await jsm.streams.getMessage(streamName, { seq });
    events.push({
      streamSeq: msg.seq,
      msgId: msg.header.get('Nats-Msg-Id') || undefined,
      subject: msg.subject,
      eventType: msg.header.get('event-type') || undefined,
      requestId: msg.header.get('x-request-id') || undefined,
      eventKey: msg.header.get('event-key') || undefined,
      payload: msg.json(),
    });
  }
  return events;
}

async function enqueue(type: string, payload: Record<string, string>): Promise<string> {
  return eventTransaction(sql, (tx) => enqueueEvent(tx, { type, payload }));
}

async function unpublishedCount(): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from outbox where published_at is null`;
  return row?.n ?? -1;
}

beforeAll(async () => {
  database = await createTestDatabase('cvoutbox');
  sql = newPool();
  // The event tables go in through a service-style first migration, as services will ship them.
  migrationsDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-outbox-'));
  writeFileSync(path.join(migrationsDir, '0001_init.sql'), EVENT_TABLES_DDL);
  await migrate(sql, { schema: SCHEMA, dir: migrationsDir });

  nats = await connectNats({ url: testNatsUrl(), name: 'outbox-test', logger });
  jsm = await nats.jetstreamManager();
  namespace = new EventNamespace(uniqueName('outbox'));
  stream = (await ensureStream(jsm, { namespace, service: 'invoice' })).config.name;
});

afterEach(async () => {
  await Promise.all(relays.splice(0).map((relay) => relay.stop()));
  await sql`truncate outbox`;
  await jsm.streams.purge(stream);
});

afterAll(async () => {
  await Promise.all(relays.map((relay) => relay.stop()));
  for (const name of [stream, ...extraStreams]) await jsm?.streams.delete(name).catch(() => undefined);
  await nats?.close();
  await Promise.all(pools.map((pool) => pool.end({ timeout: 5 })));
  await database?.drop();
  if (migrationsDir) rmSync(migrationsDir, { recursive: true, force: true });
});

describe('outbox', () => {
  it('stream naming follows the namespace', () => {
    expect(stream).toBe(`${namespace.name.toUpperCase()}_INVOICE`);
    expect(namespace.subject('invoice.paid')).toBe(`${namespace.name}.invoice.paid`);
    expect(namespace.streamSubjects('invoice')).toEqual([`${namespace.name}.invoice.>`]);
  });

  it('publishes an event committed in a transaction exactly once, with its id, type, key and request id', async () => {
    await newRelay().start();
    const id = await withRequestId('req-outbox-1', () =>
      eventTransaction(sql, (tx) =>
        enqueueEvent(tx, { type: 'invoice.paid', key: 'inv_1', payload: { invoiceId: 'inv_1', amount: '0.10000000' } }),
      ),
    );

    await waitFor('the row to be marked published', async () => (await unpublishedCount()) === 0);
    // Give a wrongly re-publishing relay a few poll rounds to show itself.
    await sleep(600);
    expect(await storedEvents()).toEqual([
      {
        streamSeq: expect.any(Number),
        msgId: id,
        subject: `${namespace.name}.invoice.paid`,
        eventType: 'invoice.paid',
        requestId: 'req-outbox-1',
        eventKey: 'inv_1',
        payload: { invoiceId: 'inv_1', amount: '0.10000000' },
      },
    ]);
    // Published: its row is gone (the stream holds it now).
    expect(await sql`select event_id from outbox where event_id = ${id}`).toEqual([]);
  });

  it("signs every event with the service's key over its subject, id and body (coinvoice-signature)", async () => {
    await newRelay().start();
    const id = await enqueue('invoice.paid', { invoiceId: 'inv_signed', amount: '0.50000000' });
    await waitFor('the row to be marked published', async () => (await unpublishedCount()) === 0);
    const [stored] = await storedEvents();
    const msg = await jsm.streams.getMessage(stream, { seq: stored?.streamSeq ?? 0 });
    // Alone in its batch: signed on its own, as every consumer version verifies.
    expect(msg.header.get(SIGNATURE_HEADER)).toMatch(/^[A-Za-z0-9+/]{86}==$/);
    expect(msg.header.get(BATCH_SIGNATURE_HEADER)).toBe('');
    const keys = testEventKeys();
    const verifier = new EventVerifier(parseVerifyKeys(keys.verifyKeys) ?? new Map());
    expect(verifier.check('invoice', msg.subject, id, msg.data, msg.header)).toBeUndefined();
    // Bound to the producer, the id, the subject and the body.
    expect(verifier.check('payout', msg.subject, id, msg.data, msg.header)).toBe('bad_signature');
    expect(verifier.check('invoice', msg.subject, 'another-id', msg.data, msg.header)).toBe('bad_signature');
    expect(verifier.check('invoice', `${namespace.name}.invoice.late_payment`, id, msg.data, msg.header)).toBe('bad_signature');
    expect(verifier.check('invoice', msg.subject, id, new TextEncoder().encode('{"invoiceId":"inv_signed","amount":"5.00000000"}'), msg.header)).toBe('bad_signature');
    expect(verifier.check('invoice', msg.subject, id, msg.data, natsHeaders())).toBe('missing_signature');
  });

  it('signs every event of a batch on its own by default (EVENT_SIGNATURES=each: what every consumer version verifies)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await enqueue('invoice.paid', { invoiceId: `inv_each_${i}`, amount: `0.0000000${i + 1}` }));
    await newRelay().start();
    await waitFor('the rows to be published', async () => (await unpublishedCount()) === 0);
    const stored = (await storedEvents()).filter((event) => ids.includes(event.msgId ?? ''));
    expect(stored).toHaveLength(3);
    const verifier = new EventVerifier(parseVerifyKeys(testEventKeys().verifyKeys) ?? new Map());
    for (const event of stored) {
      const msg = await jsm.streams.getMessage(stream, { seq: event.streamSeq });
      expect(msg.header.get(BATCH_SIGNATURE_HEADER)).toBe('');
      expect(verifier.check('invoice', msg.subject, event.msgId!, msg.data, msg.header)).toBeUndefined();
    }
  });

  it('with EVENT_SIGNATURES=batch signs the events of one batch with one signature, each verifiable alone and bound to its own bytes (coinvoice-batch-signature)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await enqueue('invoice.paid', { invoiceId: `inv_batch_${i}`, amount: `0.0000000${i + 1}` }));
    await newRelay({ signatures: 'batch' }).start();
    await waitFor('the rows to be published', async () => (await unpublishedCount()) === 0);
    const stored = await storedEvents();
    expect(stored.map((event) => event.msgId).sort()).toEqual([...ids].sort());
    const messages = await Promise.all(stored.map((event) => jsm.streams.getMessage(stream, { seq: event.streamSeq })));
    const verifier = new EventVerifier(parseVerifyKeys(testEventKeys().verifyKeys) ?? new Map());
    const signatures = new Set<string>();
    for (const msg of messages) {
      const header = msg.header.get(BATCH_SIGNATURE_HEADER);
      expect(header).toMatch(/^5\.[0-4]\.[A-Za-z0-9_-]{86}\.[A-Za-z0-9_-]+$/);
      expect(msg.header.get(SIGNATURE_HEADER)).toBe('');
      signatures.add(header.split('.')[2]!);
      const id = msg.header.get('Nats-Msg-Id');
      expect(verifier.check('invoice', msg.subject, id, msg.data, msg.header)).toBeUndefined();
      // Each event's own bytes: another body, id or subject under its batch's signature does not verify.
      expect(verifier.check('invoice', msg.subject, id, new TextEncoder().encode('{"invoiceId":"inv_batch_0","amount":"9.00000000"}'), msg.header)).toBe('bad_signature');
      expect(verifier.check('invoice', msg.subject, `${id}-copy`, msg.data, msg.header)).toBe('bad_signature');
      expect(verifier.check('invoice', `${namespace.name}.invoice.late_payment`, id, msg.data, msg.header)).toBe('bad_signature');
      expect(verifier.check('payout', msg.subject, id, msg.data, msg.header)).toBe('bad_signature');
    }
    expect(signatures.size).toBe(1);
    // One event's body under another's path and index: refused.
    const [first, second] = messages;
    expect(verifier.check('invoice', second!.subject, second!.header.get('Nats-Msg-Id'), second!.data, first!.header)).toBe('bad_signature');
  });

  it('still stores the event exactly once when the relay dies between publish and marking and another takes over', async () => {
    const doomedPool = newPool();
    const publishedBeforeCrash: string[] = [];
    const doomed = newRelay({
      sql: doomedPool,
      afterPublish: async (event) => {
        publishedBeforeCrash.push(event.id);
        // The process dies: its connections go away with the transaction uncommitted.
        await doomedPool.end({ timeout: 0 });
        throw new Error('simulated crash between publish and mark');
      },
    });
    await doomed.start();
    const id = await enqueue('invoice.paid', { invoiceId: 'inv_crash' });

    await waitFor('the doomed relay to publish', async () => publishedBeforeCrash.length > 0);
    await doomed.stop();
    // The crash state: in the stream, yet not marked, so a relay will publish it again.
    expect(publishedBeforeCrash).toEqual([id]);
    expect((await storedEvents()).map((e) => e.msgId)).toEqual([id]);
    expect(await unpublishedCount()).toBe(1);

    await newRelay().start();
    await waitFor('the new relay to mark the row', async () => (await unpublishedCount()) === 0);
    expect((await storedEvents()).map((e) => e.msgId)).toEqual([id]);
  });

  it('two relays running at once publish each of 200 events exactly once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) ids.push(await enqueue('invoice.created', { invoiceId: `inv_${i}` }));

    // Each relay counts what it published itself: JetStream's de-duplication would hide a row
    // published by both, so the stream alone cannot show that the relays never overlap.
    const publishedBy = { a: [] as string[], b: [] as string[] };
    const slowly = (into: string[]) => async (event: { id: string }) => {
      into.push(event.id);
      await sleep(1); // keeps both relays' batches in flight at the same time
    };
    const a = newRelay({ sql: newPool(), batchSize: 10, afterPublish: slowly(publishedBy.a) });
    const b = newRelay({ sql: newPool(), batchSize: 10, afterPublish: slowly(publishedBy.b) });
    await Promise.all([a.start(), b.start()]);

    await waitFor('all 200 rows to be marked', async () => (await unpublishedCount()) === 0, 30_000);
    expect(publishedBy.a.length).toBeGreaterThan(0);
    expect(publishedBy.b.length).toBeGreaterThan(0);
    const publishedByEither = [...publishedBy.a, ...publishedBy.b];
    expect(publishedByEither).toHaveLength(200);
    expect(new Set(publishedByEither)).toEqual(new Set(ids));

    const stored = await storedEvents();
    expect(stored).toHaveLength(200);
    expect(new Set(stored.map((e) => e.msgId))).toEqual(new Set(ids));
    // Published rows are deleted in the batch that sent them: the table holds only what is still
    // to be sent, however long the load lasts (docs/performance.md#events).
    const [left] = await sql<{ n: number }[]>`select count(*)::int as n from outbox`;
    expect(left!.n).toBe(0);
  });

  it('enqueueEvents writes a batch of events in one statement, in order, each with its own id and time', async () => {
    const written = await eventTransaction(sql, (tx) =>
      enqueueEvents(tx, [
        { type: 'invoice.paid', key: 'inv_b1', payload: { invoiceId: 'inv_b1', amount: '1.00000001' } },
        { type: 'invoice.paid', key: 'inv_b2', payload: { invoiceId: 'inv_b2' }, requestId: 'req-own' },
        { type: 'invoice.expired', payload: { invoiceId: 'inv_b3' } },
      ]),
    );
    expect(new Set(written).size).toBe(3);
    const rows = await sql<{ event_id: string; event_type: string; event_key: string | null; payload: unknown; request_id: string | null; created_at: Date }[]>`
      select event_id, event_type, event_key, payload, request_id, created_at from outbox where event_id = any(${written}::uuid[]) order by seq`;
    expect(rows.map((row) => row.event_id)).toEqual(written);
    expect(rows.map((row) => [row.event_type, row.event_key, row.request_id])).toEqual([
      ['invoice.paid', 'inv_b1', null],
      ['invoice.paid', 'inv_b2', 'req-own'],
      ['invoice.expired', null, null],
    ]);
    // Stored as a JSON object (queryable), not as a JSON string; a decimal string stays one.
    expect(await sql`select payload->>'amount' as amount from outbox where event_id = ${written[0]!}`).toEqual([{ amount: '1.00000001' }]);
    expect(rows[0]!.payload).toEqual({ invoiceId: 'inv_b1', amount: '1.00000001' });
    expect(rows[0]!.created_at.getTime()).toBeLessThanOrEqual(rows[2]!.created_at.getTime());
  });

  it('never publishes an event whose transaction rolled back', async () => {
    await newRelay().start();
    let rolledBackId: string | undefined;
    await expect(
      eventTransaction(sql, async (tx) => {
        rolledBackId = await enqueueEvent(tx, { type: 'invoice.expired', payload: { invoiceId: 'inv_rb' } });
        throw new Error('business rule failed after the event was written');
      }),
    ).rejects.toThrow('business rule failed');
    // A later committed event: once it is out, the relay has seen everything before it.
    const barrierId = await enqueue('invoice.paid', { invoiceId: 'inv_after' });

    await waitFor('the committed event to be published', async () => (await unpublishedCount()) === 0);
    await sleep(400);
    expect(rolledBackId).toBeDefined();
    expect((await storedEvents()).map((e) => e.msgId)).toEqual([barrierId]);
    expect(await sql`select event_id from outbox where event_id = ${rolledBackId ?? ''}`).toHaveLength(0);
  });

  it('a failed outbox insert fails the transaction and commits nothing of it', async () => {
    await sql`create table if not exists effects (id text primary key)`;
    const id = await enqueue('invoice.paid', { invoiceId: 'inv_dup' });
    // The same event id again violates outbox.event_id's unique constraint.
    const attempt = eventTransaction(sql, async (tx) => {
      await tx`insert into effects (id) values ('effect of the failed transaction')`;
      await enqueueEvent(tx, { id, type: 'invoice.paid', payload: { invoiceId: 'inv_dup' } });
      return 'reported as committed';
    });
    await expect(attempt).rejects.toMatchObject({ code: '23505' });
    expect(await sql`select id from effects`).toEqual([]);
    expect(await sql`select event_id from outbox where event_id = ${id}`).toHaveLength(1);

    // A good transaction afterwards commits its effect and its event.
    const committed = await eventTransaction(sql, async (tx) => {
      await tx`insert into effects (id) values ('effect of a good transaction')`;
      return enqueueEvent(tx, { type: 'invoice.paid', payload: { invoiceId: 'inv_ok' } });
    });
    expect(await sql`select id from effects`).toEqual([{ id: 'effect of a good transaction' }]);
    expect(await sql`select event_id from outbox where event_id = ${committed}`).toHaveLength(1);
  });

  it('under load lets events gather between batches (coalesceMs); an idle relay still starts at once', async () => {
    // Each publish held 5 ms, an event committed every 5 ms or so: without the pause each batch
    // takes the one or two that arrived during the one before (measured: ~150 batches for 400).
    const batchSizes: number[] = [];
    const relay = newRelay({ coalesceMs: 250, pollIntervalMs: 30_000, afterPublish: () => sleep(5) });
    const relayBatch = relay.relayBatch.bind(relay);
    relay.relayBatch = async () => {
      const relayed = await relayBatch();
      if (relayed > 0) batchSizes.push(relayed);
      return relayed;
    };
    await relay.start();
    await sleep(300); // idle: asleep for the poll interval

    const started = Date.now();
    const first = await enqueue('invoice.paid', { invoiceId: 'inv_idle' });
    await waitFor('the first event in the stream', async () => (await storedEvents()).some((e) => e.msgId === first), 5000);
    expect(Date.now() - started).toBeLessThan(200); // not held back by the 250 ms pause

    const ids: string[] = [first];
    for (let i = 0; i < 400; i++) {
      ids.push(await enqueue('invoice.paid', { invoiceId: `inv_load_${i}` }));
      await sleep(5);
    }
    await waitFor('every event published', async () => (await unpublishedCount()) === 0, 30_000);
    expect(new Set((await storedEvents()).map((e) => e.msgId))).toEqual(new Set(ids));
    expect(batchSizes.reduce((a, b) => a + b, 0)).toBe(ids.length);
    // 400 events over ≥ 2 s, in batches at least 250 ms apart once loaded: about 10.
    expect(batchSizes.length).toBeLessThan(25);
  });

  it('is woken by the commit: publish latency far below the poll interval', async () => {
    const pollIntervalMs = 30_000;
    await newRelay({ pollIntervalMs }).start();
    await sleep(300); // the relay has found the outbox empty and sleeps for the poll interval

    const started = Date.now();
    const id = await enqueue('invoice.paid', { invoiceId: 'inv_fast' });
    await waitFor('the event in the stream', async () => (await storedEvents()).some((e) => e.msgId === id), 5000);
    const latencyMs = Date.now() - started;
    expect(latencyMs).toBeLessThan(1000);
    process.stdout.write(`outbox: commit → stored in JetStream in ${latencyMs} ms (poll interval ${pollIntervalMs} ms)\n`);
  });

  it('is woken by a commit made through a wrapper of its pool (as a test\'s query-counting proxy is)', async () => {
    const pollIntervalMs = 30_000;
    await newRelay({ pollIntervalMs }).start();
    await sleep(300);

    // Another object than the relay's pool, forwarding everything to it.
    const wrapped = new Proxy(sql, {
      get: (target, prop) => {
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    expect(wrapped).not.toBe(sql);
    const started = Date.now();
    const id = await eventTransaction(wrapped, (tx) => enqueueEvent(tx, { type: 'invoice.paid', payload: { invoiceId: 'inv_wrapped' } }));
    await waitFor('the event in the stream', async () => (await storedEvents()).some((e) => e.msgId === id), 5000);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('leaves the pool as it was: sql.begin is postgres.js\'s own, not swapped', async () => {
    const pool = newPool();
    const begin = pool.begin;
    await newRelay({ sql: pool, pollIntervalMs: 30_000 }).start();
    expect(pool.begin).toBe(begin);
  });

  it('keeps rows while publishing fails and publishes them, in order, once JetStream takes them', async () => {
    // A namespace whose stream does not exist yet: every publish fails (no stream answers).
    const outage = new EventNamespace(uniqueName('outage'));
    await newRelay({ namespace: outage, batchSize: 3 }).start();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await enqueue('invoice.paid', { invoiceId: `inv_outage_${i}` }));

    await sleep(700); // several failed attempts with backoff
    expect(await unpublishedCount()).toBe(7);

    const outageStream = (await ensureStream(jsm, { namespace: outage, service: 'invoice' })).config.name;
    extraStreams.push(outageStream);
    await waitFor('the backlog to be published', async () => (await unpublishedCount()) === 0);
    expect((await storedEvents(outageStream)).map((e) => e.msgId)).toEqual(ids);
  });

  it('publishes different keys concurrently, one key in order; a failure mid-batch loses and reorders nothing per key', async () => {
    const KEYS = 8;
    const PER_KEY = 6;
    const ids = new Map<string, string[]>();
    await eventTransaction(sql, async (tx) => {
      for (let step = 0; step < PER_KEY; step++) {
        for (let k = 0; k < KEYS; k++) {
          const key = `inv_key_${k}`;
          const id = await enqueueEvent(tx, { type: 'invoice.paid', key, payload: { invoiceId: key, step: String(step) } });
          ids.set(key, [...(ids.get(key) ?? []), id]);
        }
      }
    });
    const inFlight = new Map<string, number>();
    let concurrent = 0;
    let maxConcurrent = 0;
    let maxPerKey = 0;
    let failedOnce = false;
    const failing = ids.get('inv_key_3')?.[2];
    await newRelay({
      batchSize: KEYS * PER_KEY,
      afterPublish: async (event) => {
        const key = [...ids].find(([, keyIds]) => keyIds.includes(event.id))?.[0] ?? '?';
        inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
        concurrent += 1;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        maxPerKey = Math.max(maxPerKey, inFlight.get(key) ?? 0);
        await sleep(2);
        concurrent -= 1;
        inFlight.set(key, (inFlight.get(key) ?? 1) - 1);
        // The third event of one key fails once (after its PubAck: the batch rolls back and is
        // published again; what JetStream stored the first time it drops as duplicates).
        if (event.id === failing && !failedOnce) {
          failedOnce = true;
          throw new Error('simulated failure in the middle of a batch');
        }
      },
    }).start();
    await waitFor('every row to be marked', async () => (await unpublishedCount()) === 0, 20_000);

    expect(failedOnce).toBe(true);
    expect(maxConcurrent).toBeGreaterThan(1); // keys went out together
    expect(maxPerKey).toBe(1); // never two events of one key at once
    const stored = await storedEvents();
    expect(stored).toHaveLength(KEYS * PER_KEY);
    for (const [key, expected] of ids) {
      expect(stored.filter((e) => e.eventKey === key).map((e) => e.msgId)).toEqual(expected);
    }
  });

  it('rejects an event type that is not "<service>.<name>" before writing anything', async () => {
    await expect(eventTransaction(sql, (tx) => enqueueEvent(tx, { type: 'Invoice Paid', payload: {} }))).rejects.toThrow(
      /invalid event type/,
    );
    expect(await sql`select 1 from outbox`).toHaveLength(0);
  });
});

describe('a lost stream (docs/architecture.md#a-lost-stream)', () => {
  it('the service\'s stream deleted (a JetStream store lost): the relay creates it again and publishes what waited; nothing is lost from the outbox', async () => {
    await newRelay({ restoreStream: () => ensureStream(jsm, { namespace, service: 'invoice' }) }).start();
    await enqueue('invoice.paid', { invoiceId: 'inv_before' });
    await waitFor('the first event published', async () => (await unpublishedCount()) === 0);
    await jsm.streams.delete(stream);
    const id = await enqueue('invoice.paid', { invoiceId: 'inv_after' });
    await waitFor('the event after the loss published', async () => (await unpublishedCount()) === 0);
    expect((await storedEvents()).map((e) => e.msgId)).toEqual([id]);
  });
});

describe('the backlog, measured (docs/events.md#outbox-backlog)', () => {
  test('events waiting in the outbox are counted and the oldest one aged at each scrape; both fall to 0 once published', async () => {
    const registry = new Registry();
    registerOutboxMetrics(registry, sql);
    const gauge = async (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await registry.metrics())?.[1] ?? 'NaN');
    expect(await gauge('outbox_unpublished_events')).toBe(0);
    expect(await gauge('outbox_oldest_unpublished_seconds')).toBe(0);
    // Three events while no relay runs (NATS down); the first written ten minutes ago.
    for (const n of [1, 2, 3]) await enqueue('invoice.paid', { invoiceId: `inv_backlog_${n}` });
    await sql`update outbox set created_at = now() - interval '10 minutes' where seq = (select min(seq) from outbox)`;
    expect(await gauge('outbox_unpublished_events')).toBe(3);
    expect(await gauge('outbox_oldest_unpublished_seconds')).toBeGreaterThanOrEqual(600);
    await newRelay().start();
    await waitFor('the backlog published', async () => (await unpublishedCount()) === 0);
    expect(await gauge('outbox_unpublished_events')).toBe(0);
    expect(await gauge('outbox_oldest_unpublished_seconds')).toBe(0);
  });
});
