/**
 * Transactional outbox.
 *
 * A service never publishes to NATS inside a request: it writes the event into its `outbox` table
 * in the same transaction as the state change (`enqueueEvent`), so the event exists if and only
 * if the change committed. The `OutboxRelay` then moves committed rows to JetStream:
 *
 *   begin
 *     select … from outbox where published_at is null order by seq limit n for update skip locked
 *     publish every row (msgID = event id) and await the PubAcks: rows of different keys
 *       concurrently, rows of one key (an invoice, a payout) one after the other
 *     delete from outbox where seq in (…)
 *   commit
 *
 * - A published row is deleted in the batch's one statement: JetStream holds the event from then
 *   on, and the table holds only what is still to be sent, however long the load lasts
 *   (docs/performance.md#events). With `keepPublishedMs` (OUTBOX_KEEP_PUBLISHED) the rows are
 *   instead marked `published_at` and kept that long for inspection, then swept.
 * - A crash between publish and commit re-publishes the rows later with the same msgID, which
 *   JetStream drops inside the stream's duplicate window: each event is stored exactly once.
 * - Several relays (one per replica) never take the same row: SKIP LOCKED hands each its own.
 * - A failed publish rolls the batch back and the relay retries with backoff: nothing is lost
 *   and, within one relay, no event of a key is stored ahead of an earlier one of the same key.
 *   Across keys, and across relays, order follows publish and commit timing, not strictly seq;
 *   consumers must not depend on order across different aggregates.
 * - A commit that enqueued events wakes the relay of its process at once (see
 *   eventTransaction); a poll interval is the fallback, e.g. for rows a crashed replica left.
 */
import { randomUUID } from 'node:crypto';
import { ErrorCode, Events, headers as natsHeaders, NatsError, type JetStreamClient, type NatsConnection } from 'nats';
import { assertSchemaName, isDatabaseUnavailableError, type Sql, type TransactionSql } from '../db';
import { currentRequestId, type Logger } from '../log';
import { assertEventType, EVENT_HEADERS, EventNamespace, type EventNamespaceLike } from './bus';
import { MAX_SIGNED_BATCH, type EventSigner } from './signing';

/** A JSON value as protobuf's `toJson` produces it (structurally equal to @bufbuild/protobuf's). */
export type JsonValue = string | number | boolean | null | JsonValue[] | JsonObject;
export type JsonObject = { [key: string]: JsonValue };

export interface NewEvent {
  /** `<service>.<name>`, e.g. `invoice.paid`. */
  type: string;
  /** The event's protobuf message as JSON (`toJson(Schema, message)`). */
  payload: JsonValue;
  /** What the event is about, e.g. the invoice id; travels in the `event-key` header. */
  key?: string;
  /** Defaults to the request id of the work in hand (see log.ts). */
  requestId?: string;
  /** Defaults to a new UUID; pass one to know it before commit (it must be a UUID). */
  id?: string;
}

declare const eventTransactionBrand: unique symbol;
/**
 * A transaction that may write events: only `eventTransaction` makes one, so `enqueueEvent`
 * cannot be called in a transaction that would not wake the relay after commit.
 */
export type EventTransaction = TransactionSql & { readonly [eventTransactionBrand]: true };

/** Transactions that wrote outbox rows; when one commits, the relays of this process are woken. */
const transactionsWithEvents = new WeakSet<object>();
/**
 * The running relays of this process (one per service process; several only in tests). Not keyed
 * by pool: a pool seen through a wrapper (a proxy counting queries, say) is another object, and a
 * relay keyed by the one a wrapper hides was never woken, its events left at the poll. A relay
 * woken for another pool's commit finds nothing and sleeps again: one empty select.
 */
const relaysInProcess = new Set<() => void>();

/**
 * Runs `fn` in a transaction of `sql` (`sql.begin`) in which events may be enqueued; after it
 * commits, if it enqueued any, the relays of this process are woken at once.
 *
 * Why no NOTIFY: Postgres serialises the commits of all transactions that sent NOTIFY on one
 * global lock, held through each commit's fsync — one NOTIFY per event would cap every
 * event-writing commit of the whole database at one per fsync (measured: ~180 invoice creations
 * a second). Every service runs its relay in the process that writes its outbox, so events leave
 * at once; another replica's relay finds a row at its next poll only if this process died between
 * commit and publish.
 */
export async function eventTransaction<T>(sql: Sql, fn: (tx: EventTransaction) => Promise<T>): Promise<T> {
  let used: TransactionSql | undefined;
  const result = (await sql.begin((tx) => {
    used = tx;
    return fn(tx as EventTransaction);
  })) as T;
  if (used && transactionsWithEvents.has(used)) for (const wake of relaysInProcess) wake();
  return result;
}

/**
 * Writes `event` into the outbox inside the caller's transaction; the relay is woken when that
 * transaction commits. Returns the event id (also its `Nats-Msg-Id` and webhook id).
 */
export async function enqueueEvent(tx: EventTransaction, event: NewEvent): Promise<string> {
  const [id] = await enqueueEvents(tx, [event]);
  return id!;
}

/**
 * Writes `events` into the outbox in one statement, in this order (a group-committed batch's
 * events: docs/performance.md#group-commit); returns their ids in the same order.
 */
export async function enqueueEvents(tx: EventTransaction, events: readonly NewEvent[]): Promise<string[]> {
  if (events.length === 0) return [];
  const requestIdNow = currentRequestId() ?? null;
  const rows = events.map((event) => {
    assertEventType(event.type);
    return {
      event_id: event.id ?? randomUUID(),
      event_type: event.type,
      event_key: event.key ?? null,
      payload: event.payload,
      request_id: event.requestId ?? requestIdNow,
    };
  });
  // The moment of each insert, not the transaction's start (now()): a producer writes an
  // aggregate's events under its row lock, so this time orders them (the event-time header,
  // the webhook's occurredAt), even when a later transaction began before an earlier one ended.
  // `with ordinality` keeps the array's order for seq.
  await tx`
    insert into outbox (event_id, event_type, event_key, payload, request_id, created_at)
    select e.event_id, e.event_type, e.event_key, e.payload, e.request_id, clock_timestamp()
    from jsonb_array_elements(${tx.json(rows as unknown as JsonValue)}) with ordinality as a(value, n)
    cross join lateral jsonb_to_record(a.value) as e(event_id uuid, event_type text, event_key text, payload jsonb, request_id text)
    order by a.n`;
  transactionsWithEvents.add(tx);
  return rows.map((row) => row.event_id);
}

/** What the relay hands to `afterPublish`. */
export interface RelayedEvent {
  seq: string;
  id: string;
  type: string;
  subject: string;
}

export interface OutboxRelayOptions {
  /** The service's pool. */
  sql: Sql;
  /**
   * The service's schema: where its outbox is and the NOTIFY channel. Defaults to the pool's
   * current schema (createDb's search_path), looked up at start.
   */
  schema?: string;
  nats: NatsConnection;
  namespace: EventNamespaceLike;
  /** The service's event key: every event leaves signed (signing.ts). */
  signer: EventSigner;
  /**
   * `batch`: the events of a batch share one signature (docs/events.md#batch-signatures); `each`
   * (default): every event is signed on its own.
   */
  signatures?: 'each' | 'batch';
  logger: Logger;
  /** Rows per transaction (default 100). */
  batchSize?: number;
  /**
   * Creates the service's stream again when a publish finds none (a JetStream store lost, the
   * stream deleted: docs/architecture.md#a-lost-stream); without it the relay failed until a restart.
   */
  restoreStream?: () => Promise<unknown>;
  /** Fallback poll when no notification arrives (default 1000 ms). */
  pollIntervalMs?: number;
  /** How long to wait for each PubAck (default 5000 ms). */
  publishTimeoutMs?: number;
  /** Backoff after a failed batch: doubles from `initialMs` up to `maxMs` (default 200 ms … 10 s). */
  retry?: { initialMs?: number; maxMs?: number };
  /**
   * 0 (default): a published row is deleted in the statement that ends its batch. More: it is
   * marked `published_at` and deleted by a sweep the relay runs every `sweepIntervalMs` (default
   * 1 min) once it is older than this.
   */
  keepPublishedMs?: number;
  sweepIntervalMs?: number;
  /**
   * Under load, how long the relay lets events gather before the next batch (default 5 ms). A
   * batch costs four round trips to Postgres whatever its size; with events arriving as fast as
   * batches run, each batch would carry one. An idle relay woken by a commit starts at once.
   */
  coalesceMs?: number;
  /**
   * Test seam: called after an event's PubAck and before its row is marked. Throwing here
   * behaves like a crash between publish and mark: the batch rolls back and is retried.
   */
  afterPublish?: (event: RelayedEvent) => void | Promise<void>;
}

interface OutboxRow {
  seq: string;
  event_id: string;
  event_type: string;
  event_key: string | null;
  payload: string;
  request_id: string | null;
  created_at: Date;
}

/** A row on its way out: its subject, its bytes and its signature header (one batch's). */
interface OutgoingEvent {
  row: OutboxRow;
  subject: string;
  body: Uint8Array;
  signature: { header: string; value: string };
}

const encoder = new TextEncoder();
/** Longest backoff after a batch failed because Postgres is unreachable. */
const DATABASE_RETRY_MAX_MS = 1_000;

export class OutboxRelay {
  private readonly sql: Sql;
  private readonly js: JetStreamClient;
  private readonly namespace: EventNamespace;
  private logger: Logger;
  private readonly batchSize: number;
  private readonly pollIntervalMs: number;
  private readonly publishTimeoutMs: number;
  private readonly retryInitialMs: number;
  private readonly retryMaxMs: number;
  private readonly keepPublishedMs: number;
  private readonly sweepIntervalMs: number;
  private readonly coalesceMs: number;

  /** Known from the options or looked up at start. */
  private schema: string | undefined;
  private running = false;
  private loop: Promise<void> | undefined;
  /** Set by a notification; makes the loop go round again instead of sleeping. */
  private wakeRequested = false;
  /** Resolves the current sleep early (on wake-up or stop). */
  private interruptSleep: (() => void) | undefined;
  private sleepIsWakeable = false;
  private stopWaking: (() => void) | undefined;
  /** NATS reconnected since the batch in hand began: if it fails, retry at once. */
  private natsReconnected = false;
  private lastSweep = Date.now();

  constructor(private readonly options: OutboxRelayOptions) {
    if (options.schema !== undefined) assertSchemaName(options.schema);
    this.schema = options.schema;
    this.sql = options.sql;
    this.js = options.nats.jetstream();
    this.namespace = EventNamespace.of(options.namespace);
    this.logger = options.logger.child({ component: 'outbox-relay', schema: options.schema });
    this.batchSize = Math.min(options.batchSize ?? 100, MAX_SIGNED_BATCH);
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.publishTimeoutMs = options.publishTimeoutMs ?? 5000;
    this.retryInitialMs = options.retry?.initialMs ?? 200;
    this.retryMaxMs = options.retry?.maxMs ?? 10_000;
    this.keepPublishedMs = options.keepPublishedMs ?? 0;
    this.sweepIntervalMs = options.sweepIntervalMs ?? 60_000;
    this.coalesceMs = options.coalesceMs ?? 5;
  }

  /** Starts relaying in the background, woken by this process's event commits and by the poll interval. */
  async start(): Promise<void> {
    if (this.running) return;
    await this.resolveSchema();
    this.running = true;
    const wake = () => this.wake();
    relaysInProcess.add(wake);
    this.stopWaking = () => relaysInProcess.delete(wake);
    this.loop = this.run();
    void this.wakeOnNatsReconnect();
  }

  /**
   * NATS is back after an outage: the events that waited in the outbox go now, not when a backoff
   * of up to retry.maxMs runs out (the backoff was waiting for exactly this).
   */
  private async wakeOnNatsReconnect(): Promise<void> {
    try {
      for await (const status of this.options.nats.status()) {
        if (!this.running) break;
        if (status.type === Events.Reconnect) {
          this.natsReconnected = true;
          this.wake(true);
        }
      }
    } catch (err) {
      this.logger.debug({ err }, 'outbox relay: NATS status stream ended');
    }
  }

  /** Stops after the batch in hand is published and marked; resolves when the relay is idle. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.interruptSleep?.();
    await this.loop;
    this.loop = undefined;
    this.stopWaking?.();
    this.stopWaking = undefined;
  }

  /**
   * Relays one batch now; returns how many events it published. The loop calls it; exposed so a
   * caller (a test, a one-shot job) can drain the outbox without starting the loop.
   */
  async relayBatch(): Promise<number> {
    const table = `${await this.resolveSchema()}.outbox`;
    return this.sql.begin(async (tx) => {
      const rows = await tx<OutboxRow[]>`
        select seq, event_id, event_type, event_key, payload::text as payload, request_id, created_at
        from ${tx(table)}
        where published_at is null
        order by seq
        limit ${this.batchSize}
        for update skip locked`;
      await this.publishInKeyOrder(rows);
      if (rows.length > 0) {
        const seqs = tx(rows.map((row) => row.seq));
        if (this.keepPublishedMs > 0) await tx`update ${tx(table)} set published_at = now() where seq in ${seqs}`;
        else await tx`delete from ${tx(table)} where seq in ${seqs}`;
      }
      return rows.length;
    });
  }

  /**
   * One PubAck round trip per key instead of one per event (measured: bench/results.md, "Event
   * path"). Within a key each PubAck is awaited before the next event of that key goes out, so a
   * failure never leaves a later event of an invoice stored ahead of an earlier one; events without
   * a key form one sequence of their own. Every sequence is let finish before a failure is reported, so
   * nothing of this batch is still in flight when its transaction rolls back.
   */
  private async publishInKeyOrder(rows: OutboxRow[]): Promise<void> {
    // One signature for the batch when configured (docs/events.md#batch-signatures): an Ed25519
    // signature's checks were a third of the payout service's CPU per event.
    const messages = rows.map((row) => ({ row, subject: this.namespace.subject(row.event_type), body: encoder.encode(row.payload) }));
    const events = messages.map(({ row, subject, body }) => ({ subject, eventId: row.event_id, body }));
    const signatures = this.options.signer.signatureHeaders(events, this.options.signatures ?? 'each');
    const sequences = new Map<string | null, OutgoingEvent[]>();
    messages.forEach((message, i) => {
      const event = { ...message, signature: signatures[i]! };
      const sequence = sequences.get(message.row.event_key);
      if (sequence) sequence.push(event);
      else sequences.set(message.row.event_key, [event]);
    });
    const outcomes = await Promise.allSettled(
      Array.from(sequences.values(), async (sequence) => {
        for (const event of sequence) await this.publish(event);
      }),
    );
    const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
    if (failed) throw failed.reason;
  }

  private async publish({ row, subject, body, signature }: OutgoingEvent): Promise<void> {
    const headers = natsHeaders();
    headers.set(EVENT_HEADERS.eventType, row.event_type);
    headers.set(EVENT_HEADERS.occurredAt, row.created_at.toISOString());
    if (row.request_id) headers.set(EVENT_HEADERS.requestId, row.request_id);
    if (row.event_key) headers.set(EVENT_HEADERS.eventKey, row.event_key);
    headers.set(signature.header, signature.value);
    const ack = await this.js.publish(subject, body, {
      msgID: row.event_id,
      headers,
      timeout: this.publishTimeoutMs,
    });
    if (ack.duplicate) {
      this.logger.info(
        { eventId: row.event_id, eventType: row.event_type },
        'outbox relay: event was already in the stream (re-publish after a crash)',
      );
    }
    await this.options.afterPublish?.({ seq: row.seq, id: row.event_id, type: row.event_type, subject });
  }

  private async resolveSchema(): Promise<string> {
    if (this.schema === undefined) {
      const [row] = await this.sql<{ schema: string | null }[]>`select current_schema() as schema`;
      const schema = row?.schema;
      if (!schema) throw new Error('outbox relay: the pool has no current schema; pass `schema` or use createDb');
      assertSchemaName(schema);
      this.schema = schema;
      this.logger = this.options.logger.child({ component: 'outbox-relay', schema });
    }
    return this.schema;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      this.wakeRequested = false;
      this.natsReconnected = false;
      let relayed: number;
      try {
        relayed = await this.relayBatch();
        failures = 0;
      } catch (err) {
        failures += 1;
        if (isNoStream(err) && this.options.restoreStream) {
          try {
            await this.options.restoreStream();
            this.logger.error({ err }, 'outbox relay: no stream took the events (lost or deleted); created it again');
          } catch (restoreError) {
            this.logger.warn({ err: restoreError }, 'outbox relay: no stream took the events, and creating it failed; retrying');
          }
        }
        // Postgres unreachable: a failed attempt costs nothing (refused at once), and a long
        // backoff would keep waiting events back for up to retry.maxMs after it returns.
        const maxMs = isDatabaseUnavailableError(err) ? Math.min(this.retryMaxMs, DATABASE_RETRY_MAX_MS) : this.retryMaxMs;
        const retryInMs = Math.min(maxMs, this.retryInitialMs * 2 ** (failures - 1));
        if (this.natsReconnected) {
          // Its publish went out while NATS was away; NATS is back now, so retry at once.
          this.logger.warn({ err, failures }, 'outbox relay: batch failed while NATS came back; retrying now');
          continue;
        }
        this.logger.warn({ err, failures, retryInMs }, 'outbox relay: batch failed; retrying');
        // Notifications must not cut a backoff short: they keep coming while NATS is down.
        await this.sleep(retryInMs, false);
        continue;
      }
      if (relayed > 0) this.logger.debug({ relayed }, 'outbox relay: published');
      await this.sweepIfDue();
      // A full batch means more may be waiting: go on at once.
      if (relayed >= this.batchSize) continue;
      // A wake-up during the batch means new rows, and events coming as fast as batches run:
      // let a few more gather, so the next batch's round trips are shared.
      if (this.wakeRequested) {
        if (this.coalesceMs > 0) await this.sleep(this.coalesceMs, false);
        continue;
      }
      await this.sleep(this.pollIntervalMs, true);
    }
  }

  private wake(evenFromBackoff = false): void {
    this.wakeRequested = true;
    if (this.sleepIsWakeable || evenFromBackoff) this.interruptSleep?.();
  }

  private sleep(ms: number, wakeable: boolean): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.interruptSleep = undefined;
        this.sleepIsWakeable = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.interruptSleep = done;
      this.sleepIsWakeable = wakeable;
    });
  }

  private async sweepIfDue(): Promise<void> {
    // Also with nothing kept: rows marked by a relay that kept them before are swept here.
    if (Date.now() - this.lastSweep < this.sweepIntervalMs) return;
    this.lastSweep = Date.now();
    try {
      const deleted = await deletePublishedOutboxRows(this.sql, {
        schema: await this.resolveSchema(),
        olderThanMs: this.keepPublishedMs,
      });
      if (deleted > 0) this.logger.info({ deleted }, 'outbox relay: swept published events');
    } catch (err) {
      this.logger.warn({ err }, 'outbox relay: retention sweep failed');
    }
  }
}

/** A JetStream publish nobody answered: no stream holds the subject (or JetStream is not up yet). */
function isNoStream(err: unknown): boolean {
  return err instanceof NatsError && err.code === ErrorCode.NoResponders;
}

/** Deletes published outbox rows older than `olderThanMs`; returns how many. */
export async function deletePublishedOutboxRows(
  sql: Sql,
  options: { schema: string; olderThanMs: number; limit?: number },
): Promise<number> {
  assertSchemaName(options.schema);
  const cutoff = new Date(Date.now() - options.olderThanMs);
  // Bounded batches keep the delete's locks and WAL small; the next sweep takes the rest.
  const result = await sql`
    delete from ${sql(`${options.schema}.outbox`)}
    where seq in (
      select seq from ${sql(`${options.schema}.outbox`)}
      where published_at is not null and published_at < ${cutoff}
      order by seq
      limit ${options.limit ?? 10_000}
    )`;
  return result.count;
}
