/**
 * Idempotent JetStream consumer.
 *
 * JetStream delivers at least once: a message comes again when its ack is lost, when a replica
 * dies mid-handling, or when the relay re-published it outside the duplicate window. So the
 * effect of an event and the record that it was handled commit together:
 *
 *   begin
 *     insert into processed_events (consumer_name, event_id) … on conflict do nothing
 *     → row already there: a duplicate, skip the handler
 *     → inserted: handler(tx, event)
 *   commit, then ack        (handler failed: rollback, nak with a growing delay)
 *
 * A duplicate handled concurrently by another replica waits on the primary key until the first
 * transaction ends, then finds the row (skip) or, if that one rolled back, handles it itself.
 *
 * The consumer is a durable pull consumer shared by every replica of the service (each message
 * goes to one of them). Messages are handled in delivery order per replica. They are pulled in
 * batches (`batchSize`, default 32): one pull request for up to that many instead of one request
 * and round trip per message. With `groupTransactions`, messages that arrive while a transaction
 * runs are handled together in the next one (group commit, docs/performance.md#events): one BEGIN
 * and one COMMIT for the group, each event still claimed and handled in order inside it; if that
 * transaction fails, each message of the group is handled again alone, in order, with its own retry.
 *
 * With a `statementHandler` instead, the claim and the effect are ONE statement and no transaction
 * is opened (a statement commits atomically on its own; docs/performance.md#events): the handler
 * puts the claim in a CTE and makes every effect depend on its row, so a duplicate changes nothing.
 */
import {
  AckPolicy,
  DeliverPolicy,
  nanos,
  type Consumer,
  type ConsumerConfig,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type NatsConnection,
} from 'nats';
import { Code, ConnectError } from '@connectrpc/connect';
import { isDatabaseUnavailableError, type Sql, type SqlFragment, type TransactionSql } from '../db';
import { sanitizeRequestId, withRequestId, type Logger } from '../log';
import { RetentionJob } from '../periodic-worker';
import { EVENT_HEADERS, isJetStreamApiError, JS_ERR, MSG_ID_HEADER } from './bus';
import { eventTransaction, type EventTransaction, type JsonValue } from './outbox';
import { GroupCommit } from '../group-commit';
import type { EventRejection, EventVerifier } from './signing';

export interface ConsumedEvent {
  /** The event id (the message's Nats-Msg-Id, the outbox row's event_id). */
  id: string;
  /** e.g. `invoice.paid` */
  type: string;
  subject: string;
  /** The event's protobuf message as JSON; decode with `fromJson(Schema, payload)`. */
  payload: JsonValue;
  key?: string;
  requestId?: string;
  /** When the event was written (ISO 8601), if the publisher said. */
  occurredAt?: string;
  /** 1 on first delivery. */
  deliveryCount: number;
  streamSequence: number;
}

/** Applies an event's effect inside `tx`; throwing rolls it back and the event is retried. */
export type EventHandler = (tx: EventTransaction, event: ConsumedEvent) => Promise<void>;

/**
 * Applies the effects of several events inside `tx`, each claimed already (none a duplicate), in
 * delivery order: a handler that writes a group's rows with multi-row statements. Called with one
 * event when it is handled alone. Throwing rolls them all back; each is then handled alone.
 */
export type GroupHandler = (tx: EventTransaction, events: readonly ConsumedEvent[]) => Promise<void>;

/**
 * The statement that records an event as processed: an INSERT into processed_events returning the
 * row, or nothing for a duplicate. A fragment, to be the first CTE of a statementHandler's statement.
 */
export type EventClaim = SqlFragment;

/**
 * Applies an event's effect in ONE statement that also runs `claim` (as a CTE) and changes nothing
 * unless the claim returned its row; resolves whether it did (false: a duplicate). Throwing, or the
 * statement failing, changes nothing and the event is retried. Events it applies publish nothing
 * (no outbox: that needs a transaction).
 */
export type StatementHandler = (sql: Sql, event: ConsumedEvent, claim: EventClaim) => Promise<boolean>;

export interface IdempotentConsumerOptions {
  /** The service's pool: `processed_events` and the handler's tables resolve in its schema. */
  sql: Sql;
  nats: NatsConnection;
  /** The stream to read, e.g. `namespace.streamName('invoice')`. */
  stream: string;
  /**
   * Durable consumer name, the same on every replica (they share the work), and the
   * `consumer_name` of processed_events rows, e.g. "payout-ledger".
   */
  name: string;
  /** Subjects to receive, e.g. `[namespace.subject('invoice.paid')]`. Several need NATS ≥ 2.10. */
  filterSubjects: string[];
  /**
   * Exactly one of `handler` (a transaction per event, or per group), `groupHandler` (likewise, the
   * group's events given to it together) and `statementHandler` (one statement per event).
   */
  handler?: EventHandler;
  groupHandler?: GroupHandler;
  statementHandler?: StatementHandler;
  /**
   * The producers' public keys (EVENT_VERIFY_KEYS): an event whose signature does not verify
   * against a key of the service owning its type is dead-lettered, never handled.
   */
  verifier: EventVerifier;
  /**
   * Event types this consumer acts on. Others in its subjects (e.g. payout.verification_code_issued
   * for the notifier's consumer of payout.>) are acknowledged without a transaction: recording a no-op costs a commit each.
   * Default: every type.
   */
  handles?: (eventType: string) => boolean;
  logger: Logger;
  /**
   * How long the server waits for an ack before redelivering (default 5 s): how soon another
   * replica, or this one restarted, gets what a killed process held. Every message received and not
   * yet settled — in a handler or still waiting behind one — is kept alive meanwhile
   * (docs/architecture.md#ack-wait), so a slow handler is not redelivered however long it takes.
   */
  ackWaitMs?: number;
  /** Long-poll length of one pull request (default 5000 ms, at least 1000). */
  pullExpiresMs?: number;
  /**
   * Messages one pull request asks for (default 32). They are handled in order as they arrive;
   * those not yet handled wait in the client, kept alive like the one in hand.
   */
  batchSize?: number;
  /** Redelivery delay after a failure: doubles per delivery from `initialMs` up to `maxMs` (default 1 s … 60 s). */
  retry?: { initialMs?: number; maxMs?: number };
  /** Deliveries before JetStream gives up on a message (default unlimited: a bug fix should not lose events). */
  maxDeliver?: number;
  /**
   * Messages that arrive while a transaction runs are handled together in the next (one
   * transaction per group; docs/performance.md#events). For handlers that only write to the
   * database; off (one transaction per event) for a handler that holds something else until its
   * commit — the notifier reserves a delivery slot per event, and a group would hold them all.
   */
  groupTransactions?: boolean;
  /**
   * Test seam: called after the transaction committed and before the ack. Throwing here behaves
   * like a crash between commit and ack: the message is delivered again.
   */
  afterCommit?: (event: ConsumedEvent) => void | Promise<void>;
  /**
   * Creates the stream again when it is gone (a JetStream store lost or a stream deleted:
   * docs/architecture.md#a-lost-stream), before the durable is set up again; for a stream of
   * another service, without reconfiguring it (`ensureServiceStream` with `reconfigure: false`).
   */
  restoreStream?: () => Promise<unknown>;
}

const decoder = new TextDecoder();

/** How long JetStream waits for an ack before delivering a message again (docs/architecture.md#ack-wait). */
export const DEFAULT_ACK_WAIT_MS = 5_000;

export class IdempotentConsumer {
  private readonly js: JetStreamClient;
  private readonly logger: Logger;
  private readonly ackWaitMs: number;
  private readonly pullExpiresMs: number;
  private readonly batchSize: number;
  private readonly retryInitialMs: number;
  private readonly retryMaxMs: number;
  private running = false;
  private loop: Promise<void> | undefined;
  private interruptSleep: (() => void) | undefined;
  /** The pull request in progress (its messages are handled as they arrive). */
  private pull: ConsumerMessages | undefined;
  /**
   * A message failed because a dependency is down (not because of the message): until then,
   * messages are handed back without a try. A pull stays open up to its expiry, so a message handed
   * back comes again inside it; after this time it is tried, and finds the dependency back or not.
   */
  private dependencyDownUntil = 0;
  /**
   * Messages received and not yet settled, in a handler or waiting behind one: all kept alive
   * together until settled (docs/architecture.md#ack-wait).
   */
  private readonly held = new Set<JsMsg>();

  private get dependencyDown(): boolean {
    return Date.now() < this.dependencyDownUntil;
  }

  /** A message failed for a dependency's outage: hand back what comes, without a try, for the initial retry delay. */
  private dependencyWentDown(): void {
    this.dependencyDownUntil = Date.now() + this.retryInitialMs;
  }

  constructor(private readonly options: IdempotentConsumerOptions) {
    if (options.filterSubjects.length === 0) throw new Error(`consumer ${options.name}: filterSubjects is empty`);
    if ([options.handler, options.groupHandler, options.statementHandler].filter((h) => h !== undefined).length !== 1) {
      throw new Error(`consumer ${options.name}: give exactly one of handler, groupHandler and statementHandler`);
    }
    if (options.statementHandler && options.groupTransactions) throw new Error(`consumer ${options.name}: a statementHandler opens no transaction to group`);
    // Fails at start, not at the first event: a consumer that holds no key of a producer it reads
    // would dead-letter every event of it.
    options.verifier.requireProducers([...new Set(options.filterSubjects.map((subject) => producerOf(eventTypeOf(subject))))], options.name);
    this.js = options.nats.jetstream();
    this.logger = options.logger.child({ component: 'consumer', consumer: options.name, stream: options.stream });
    this.ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
    this.pullExpiresMs = Math.max(1000, options.pullExpiresMs ?? 5000);
    this.batchSize = Math.max(1, options.batchSize ?? 32);
    this.retryInitialMs = options.retry?.initialMs ?? 1000;
    this.retryMaxMs = options.retry?.maxMs ?? 60_000;
  }

  /** Creates or updates the durable consumer, then handles messages in the background. */
  async start(): Promise<void> {
    if (this.running) return;
    const jsm = await this.options.nats.jetstreamManager();
    await this.ensureDurable(jsm);
    const consumer = await this.js.consumers.get(this.options.stream, this.options.name);
    this.running = true;
    this.loop = this.run(consumer);
  }

  /**
   * Graceful stop: pulls no more, finishes (commits and acks) the message in hand, and hands the
   * messages of the batch not yet handled straight back (nak without delay) to another replica.
   * Resolves as soon as the message in hand (if any) is done.
   */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    // End the pull request now instead of at its expiry: the server sends nothing more, and the
    // messages already received are still iterated (and nak'ed). A message the server sends in
    // that very instant is redelivered after ack_wait, as after a crash.
    this.pull?.stop();
    this.interruptSleep?.();
    await this.loop;
    this.loop = undefined;
  }

  private async ensureDurable(jsm: JetStreamManager): Promise<void> {
    const { stream, name, filterSubjects } = this.options;
    const filter: Partial<ConsumerConfig> =
      filterSubjects.length === 1 ? { filter_subject: filterSubjects[0] } : { filter_subjects: filterSubjects };
    const config: Partial<ConsumerConfig> = {
      durable_name: name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(this.ackWaitMs),
      max_deliver: this.options.maxDeliver ?? -1,
      ...filter,
    };
    try {
      // Identical config on an existing durable is a no-op, so every replica can call this at start.
      await jsm.consumers.add(stream, config);
    } catch (err) {
      const exists =
        isJetStreamApiError(err, JS_ERR.consumerNameExists) || isJetStreamApiError(err, JS_ERR.consumerAlreadyExists);
      if (!exists) throw err;
      // Created by an older release with other settings: bring the updatable ones up to date.
      const { durable_name: _durable, deliver_policy: _deliver, ack_policy: _ack, ...updatable } = config;
      await jsm.consumers.update(stream, name, updatable);
    }
  }

  private async run(consumer: Consumer): Promise<void> {
    // Tell the server we are still at it: a held message is redelivered only if this process dies.
    const keepAlive = setInterval(() => {
      try {
        this.held.forEach((msg) => msg.working());
      } catch (err) {
        // The connection is closed: nothing to keep alive through it any more.
        this.logger.debug({ err }, 'consumer: could not keep held messages alive');
      }
    }, Math.max(250, Math.floor(this.ackWaitMs / 2)));
    try {
      await this.pullUntilStopped(consumer);
    } finally {
      clearInterval(keepAlive);
    }
  }

  // Settling a held message: it is no longer kept alive.
  private ack(msg: JsMsg): void {
    this.held.delete(msg);
    msg.ack();
  }

  /** Hands a message back, to come again after `delayMs` (at once without). */
  private nak(msg: JsMsg, delayMs?: number): void {
    this.held.delete(msg);
    msg.nak(delayMs);
  }

  private term(msg: JsMsg): void {
    this.held.delete(msg);
    msg.term();
  }

  /**
   * Whether the stream or this durable no longer exists, asked of the server: a pull pending when
   * the stream is deleted ends with "consumer deleted" (409), which names no API error; the next
   * pull said "stream not found" only when it expired, after the backoff — over 10 s on a slow CI
   * host (a CI run). Asked at once, the loss is set right at once.
   */
  private async durableGone(): Promise<boolean> {
    try {
      await (await this.options.nats.jetstreamManager()).consumers.info(this.options.stream, this.options.name);
      return false;
    } catch (err) {
      return isGone(err);
    }
  }

  private async pullUntilStopped(initial: Consumer): Promise<void> {
    let consumer = initial;
    let failures = 0;
    while (this.running) {
      try {
        const pull = await consumer.fetch({ max_messages: this.batchSize, expires: this.pullExpiresMs });
        this.pull = pull;
        if (!this.running) pull.stop(); // stop() came while the request was being made
        await this.handleAll(pull);
        failures = 0;
        if (this.dependencyDown) {
          // Postgres (or a service the handler calls) is down: pause instead of pulling message
          // after message only to hand each back; the next pull tries again.
          await this.sleep(this.dependencyDownUntil - Date.now());
        }
      } catch (err) {
        if (!this.running) break;
        failures += 1;
        if (isGone(err) || (await this.durableGone())) {
          // The stream or the durable is gone (a JetStream store lost, a stream deleted by hand):
          // set both up again rather than fail every pull until a restart (an outside review).
          try {
            this.logger.error({ err, stream: this.options.stream, consumer: this.options.name }, 'consumer: its stream or durable is gone; setting them up again');
            await this.options.restoreStream?.();
            await this.ensureDurable(await this.options.nats.jetstreamManager());
            consumer = await this.js.consumers.get(this.options.stream, this.options.name);
            failures = 0;
            continue;
          } catch (restoreError) {
            this.logger.warn({ err: restoreError }, 'consumer: could not set its stream and durable up again; retrying');
          }
        }
        const retryInMs = Math.min(this.retryMaxMs, this.retryInitialMs * 2 ** (failures - 1));
        this.logger.warn({ err, failures, retryInMs }, 'consumer: pull failed; retrying');
        await this.sleep(retryInMs);
      } finally {
        this.pull = undefined;
      }
    }
  }

  /**
   * Handles a pull's messages in delivery order. Each is taken from the pull as it arrives — held,
   * so kept alive (docs/architecture.md#ack-wait) — and handled after those before it: one at a
   * time, or grouped, messages that arrive while a group's transaction runs forming the next group
   * (a group commits before the next begins, so delivery order holds). Resolves when every message
   * of the pull is settled.
   */
  private async handleAll(pull: ConsumerMessages): Promise<void> {
    const groups = this.options.groupTransactions
      ? new GroupCommit<JsMsg, void>({
          run: async (msgs) => {
            await this.handleGroup(msgs);
            return msgs.map(() => ({ ok: true, value: undefined }));
          },
          maxItems: this.batchSize,
          maxInFlight: 1,
        })
      : undefined;
    const handling: Array<Promise<void>> = [];
    let inOrder = Promise.resolve();
    try {
      for await (const msg of pull) {
        this.held.add(msg);
        if (!this.running || this.dependencyDown) {
          // Stopping: give it back at once rather than after ack_wait. A dependency is down: the
          // rest of the batch would fail alike; it comes back after the usual delay. The pull is
          // not stopped early: messages the server already sent for it would then reach nobody
          // and come back only after ack_wait. (Those already waiting are handed back the same
          // way when their turn comes: handleEachAlone, handleGroup.)
          this.nak(msg, this.running ? this.retryInitialMs : undefined);
          continue;
        }
        if (groups) handling.push(groups.submit(msg));
        else inOrder = inOrder.then(() => this.handleEachAlone([msg]));
      }
    } finally {
      const outcomes = await Promise.allSettled([...handling, inOrder]);
      if (this.held.size > 0) {
        // Only a path that threw (the NATS connection gone) leaves a message unsettled: it must
        // not be kept alive forever.
        this.logger.warn({ unsettled: this.held.size }, 'consumer: messages left unsettled; JetStream delivers them again after ack_wait');
        this.held.clear();
      }
      const failed = outcomes.find((outcome) => outcome.status === 'rejected');
      if (failed) throw failed.reason;
    }
  }

  /**
   * A group of messages that arrived together: one transaction for all of them (each event claimed
   * and handled in order inside it), then each acked. Alone, or when that transaction fails, each
   * is handled by `handle` on its own (its own transaction, its own nak and backoff).
   */
  private async handleGroup(msgs: readonly JsMsg[]): Promise<void> {
    if (msgs.length === 1 || this.dependencyDown || !this.running) {
      await this.handleEachAlone(msgs);
      return;
    }
    const events: Array<{ msg: JsMsg; event: ConsumedEvent }> = [];
    for (const msg of msgs) {
      if (this.ackedAsNotActedOn(msg)) continue;
      const event = await this.decode(msg);
      if (event) events.push({ msg, event });
    }
    if (events.length === 0) return;
    let outcomes: Array<'handled' | 'duplicate' | 'given back'>;
    try {
      outcomes = await eventTransaction(this.options.sql, async (tx) => {
        const claimed = await tx<{ event_id: string }[]>`
          insert into processed_events (consumer_name, event_id)
          select ${this.options.name}, e from unnest(${events.map(({ event }) => event.id)}::text[]) as e
          on conflict do nothing
          returning event_id`;
        const fresh = new Set(claimed.map((row) => row.event_id));
        const { groupHandler } = this.options;
        if (groupHandler) {
          // The whole group is in hand: applied together, then acked together.
          const handled: ConsumedEvent[] = [];
          const results = events.map(({ event }) => {
            if (!fresh.delete(event.id)) return 'duplicate' as const;
            handled.push(event);
            return 'handled' as const;
          });
          if (handled.length > 0) await groupHandler(tx, handled);
          return results;
        }
        const givenBack: string[] = [];
        const results = await mapInOrder(events, async ({ event }) => {
          // Stopping: the event in hand is finished, the rest of the group goes back unhandled.
          if (!this.running && fresh.has(event.id)) {
            givenBack.push(event.id);
            return 'given back' as const;
          }
          // A message delivered twice into one group is handled once: the first copy takes the claim.
          if (!fresh.delete(event.id)) return 'duplicate' as const;
          await withRequestId(event.requestId, () => this.options.handler!(tx, event));
          return 'handled' as const;
        });
        if (givenBack.length > 0) {
          await tx`delete from processed_events where consumer_name = ${this.options.name} and event_id = any(${givenBack}::text[])`;
        }
        return results;
      });
    } catch (err) {
      this.logger.debug({ err, events: events.length }, 'consumer: a group failed; handling each of its events alone');
      await this.handleEachAlone(events.map(({ msg }) => msg));
      return;
    }
    // Each event's after-commit step first, then every ack in one synchronous pass: nats.js writes
    // what is queued in one turn as one socket write, so the group's acks travel together (an
    // await between two acks flushed each on its own: a write per event; docs/performance.md#events).
    const settled: Array<{ msg: JsMsg; event: ConsumedEvent; outcome: 'handled' | 'duplicate' }> = [];
    for (const [i, { msg, event }] of events.entries()) {
      const outcome = outcomes[i]!;
      if (outcome === 'given back') {
        this.nak(msg);
        continue;
      }
      try {
        if (this.options.afterCommit) await this.options.afterCommit(event);
        settled.push({ msg, event, outcome });
      } catch (err) {
        this.logger.warn({ err, eventId: event.id, retryInMs: this.retryInitialMs }, 'consumer: after-commit step failed; event will be redelivered');
        this.nak(msg, this.retryInitialMs);
      }
    }
    for (const { msg, event, outcome } of settled) {
      this.ack(msg);
      if (outcome === 'handled') this.logger.debug({ eventId: event.id, eventType: event.type }, 'consumer: event handled');
      else this.logger.info({ eventId: event.id, eventType: event.type }, 'consumer: duplicate event skipped');
    }
  }

  /** Each message in its own transaction, in order; handed back instead while stopping or while a dependency is down. */
  private async handleEachAlone(msgs: readonly JsMsg[]): Promise<void> {
    for (const msg of msgs) {
      if (this.dependencyDown || !this.running) this.nak(msg, this.running ? this.retryInitialMs : undefined);
      else await this.handle(msg);
    }
  }

  /**
   * Acks a message whose type this consumer never acts on, judged by the subject alone, before
   * any signature check or parse: it costs one ack (NATS 2.9 takes one filter subject per
   * consumer, so a stream's other types still arrive; docs/performance.md#events).
   */
  private ackedAsNotActedOn(msg: JsMsg): boolean {
    if (!this.options.handles || this.options.handles(eventTypeOf(msg.subject))) return false;
    this.ack(msg);
    return true;
  }

  private async handle(msg: JsMsg): Promise<void> {
    const requestId = sanitizeRequestId(msg.headers?.get(EVENT_HEADERS.requestId));
    if (this.ackedAsNotActedOn(msg)) return;
    await withRequestId(requestId, async () => {
      const event = await this.decode(msg);
      if (!event) return;
      const log = this.logger.child({ eventId: event.id, eventType: event.type, delivery: event.deliveryCount });
      try {
        const { sql, statementHandler, handler, groupHandler } = this.options;
        const claim = (q: Sql | TransactionSql) => q`
          insert into processed_events (consumer_name, event_id)
          values (${this.options.name}, ${event.id})
          on conflict do nothing
          returning event_id`;
        const applied = statementHandler
          ? await statementHandler(sql, event, claim(sql))
          : await eventTransaction(sql, async (tx) => {
              if ((await claim(tx)).length === 0) return false;
              if (groupHandler) await groupHandler(tx, [event]);
              else await handler!(tx, event);
              return true;
            });
        await this.options.afterCommit?.(event);
        this.ack(msg);
        if (applied) log.debug('consumer: event handled');
        else log.info('consumer: duplicate event skipped');
      } catch (err) {
        // A dependency outage is not the message's fault: its redelivery delay must not grow with
        // every failed delivery during the outage (up to retry.maxMs after it ends), so it comes
        // back after the initial delay while the loop pauses (see run).
        const outage = isDependencyOutage(err);
        if (outage) this.dependencyWentDown();
        const retryInMs = outage
          ? this.retryInitialMs
          : Math.min(this.retryMaxMs, this.retryInitialMs * 2 ** (event.deliveryCount - 1));
        log.warn({ err, retryInMs }, 'consumer: handler failed; event will be redelivered');
        this.nak(msg, retryInMs);
      }
    });
  }

  /**
   * Reads the event from a message, once its signature verified. A message we can never handle is
   * terminated (and logged); one whose signature is missing or wrong is dead-lettered, then
   * terminated. Undefined when the message was settled here (or handed back: Postgres down).
   */
  private async decode(msg: JsMsg): Promise<ConsumedEvent | undefined> {
    const id = msg.headers?.get(MSG_ID_HEADER);
    const fields = { subject: msg.subject, streamSequence: msg.seq };
    if (!id) {
      this.logger.error(fields, 'consumer: message without Nats-Msg-Id cannot be de-duplicated; terminated');
      this.term(msg); // no reason text: servers before 2.10 ignore a TERM that carries one
      return undefined;
    }
    // The type comes from the subject, which the signature covers, never from a header.
    const type = eventTypeOf(msg.subject);
    const rejection = this.options.verifier.check(producerOf(type), msg.subject, id, msg.data, msg.headers);
    if (rejection) {
      await this.deadLetter(msg, id, rejection);
      return undefined;
    }
    let payload: JsonValue;
    try {
      payload = JSON.parse(decoder.decode(msg.data)) as JsonValue;
    } catch (err) {
      this.logger.error({ ...fields, eventId: id, err }, 'consumer: payload is not JSON; terminated');
      this.term(msg);
      return undefined;
    }
    const key = msg.headers?.get(EVENT_HEADERS.eventKey) || undefined;
    const occurredAt = msg.headers?.get(EVENT_HEADERS.occurredAt) || undefined;
    return {
      id,
      type,
      subject: msg.subject,
      payload,
      key,
      requestId: sanitizeRequestId(msg.headers?.get(EVENT_HEADERS.requestId)),
      occurredAt,
      deliveryCount: msg.info.deliveryCount,
      streamSequence: msg.info.streamSequence,
    };
  }

  /**
   * Keeps a refused message in dead_letter_events, counts it and terminates it. Logged once: a
   * redelivery (the term was lost) finds its row and only terminates again. Postgres down: the
   * message is handed back to come again.
   */
  private async deadLetter(msg: JsMsg, eventId: string, reason: EventRejection): Promise<void> {
    const headers: Record<string, string[]> = {};
    for (const [name, values] of msg.headers ?? []) headers[name] = values;
    try {
      const inserted = await this.options.sql`
        insert into dead_letter_events (consumer_name, stream, stream_sequence, subject, event_id, reason, headers, body)
        values (${this.options.name}, ${this.options.stream}, ${msg.info.streamSequence}, ${msg.subject}, ${eventId}, ${reason},
                ${this.options.sql.json(headers)}, ${Buffer.from(msg.data)})
        on conflict (consumer_name, stream, stream_sequence) do nothing
        returning id`;
      if (inserted.length > 0) {
        this.options.verifier.countRejection(reason, this.options.name);
        this.logger.error(
          { subject: msg.subject, streamSequence: msg.info.streamSequence, eventId, reason, deadLetterId: inserted[0]?.id },
          'consumer: event refused (signature missing or wrong); dead-lettered, not acted on',
        );
      }
      this.term(msg);
    } catch (err) {
      if (isDependencyOutage(err)) this.dependencyWentDown();
      this.logger.warn({ err, eventId, reason }, 'consumer: could not dead-letter a refused event; it will come again');
      this.nak(msg, this.retryInitialMs);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.interruptSleep = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.interruptSleep = done;
    });
  }
}

/** A statementHandler's statement when the event has no effect: the claim alone. True when claimed (not a duplicate). */
export async function claimEvent(sql: Sql, claim: EventClaim): Promise<boolean> {
  const [row] = await sql<Array<{ claimed: boolean }>>`with claim as (${claim}) select exists (select from claim) as claimed`;
  return row?.claimed === true;
}

/** `fn` over `items` one after the other (each awaited before the next starts). */
async function mapInOrder<T, R>(items: readonly T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (const item of items) results.push(await fn(item));
  return results;
}

/** `<ns>.invoice.paid` → `invoice.paid` (a namespace has no dots). */
function eventTypeOf(subject: string): string {
  return subject.slice(subject.indexOf('.') + 1);
}

/** The service that owns (publishes and signs) an event type: its first token. */
function producerOf(eventType: string): string {
  return eventType.split('.')[0] ?? '';
}

/** Postgres unreachable, or a service the handler called answering unavailable / too late. */
function isDependencyOutage(err: unknown): boolean {
  if (isDatabaseUnavailableError(err)) return true;
  return err instanceof ConnectError && (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded);
}

/**
 * Deletes processed-event records older than `olderThanMs`, at most `limit` (oldest first). Keep
 * them longer than the streams keep events: a record is what makes a replayed event a no-op.
 */
export async function deleteProcessedEvents(sql: Sql, options: { olderThanMs: number; limit?: number }): Promise<number> {
  const cutoff = new Date(Date.now() - options.olderThanMs);
  const result = await sql`
    delete from processed_events
    where (consumer_name, event_id) in (
      select consumer_name, event_id from processed_events
      where processed_at < ${cutoff}
      order by processed_at
      limit ${options.limit ?? 10_000}
    )`;
  return result.count;
}

/** The retention job of processed_events: hourly, a bounded batch at a time (a full batch: the next at once). */
export function processedEventsRetention(options: { sql: Sql; logger: Logger; retentionMs: number; intervalMs?: number; batchSize?: number }): RetentionJob {
  return new RetentionJob({
    logger: options.logger,
    component: 'processed-events-retention',
    intervalMs: options.intervalMs ?? 60 * 60_000,
    batchSize: options.batchSize ?? 10_000,
    prune: (limit) => deleteProcessedEvents(options.sql, { olderThanMs: options.retentionMs, limit }),
  });
}

/** The stream or the durable does not exist (a JetStream store lost, a stream deleted by hand). */
function isGone(err: unknown): boolean {
  return isJetStreamApiError(err, JS_ERR.streamNotFound) || isJetStreamApiError(err, JS_ERR.consumerNotFound);
}

