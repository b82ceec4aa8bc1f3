/**
 * What the notifier consumes: every event of the invoice and payout streams, each through one
 * durable pull consumer per stream shared by all replicas (NATS 2.9: one filter subject per
 * consumer, so a wildcard `<ns>.<service>.>`), idempotently (runtime IdempotentConsumer: the
 * processed_events row and the effect commit together).
 *
 * - An event the payload table maps to a webhook: its project event and, for a project with a
 *   webhook URL, an original delivery due now, written with the processed_events row in ONE
 *   statement (no transaction; docs/performance.md#events). The worker is woken after it.
 * - Anything else (internal events, unknown types): recorded as processed, nothing else.
 */
import { claimEvent, ensureServiceStream, EventNamespace, IdempotentConsumer, type ConsumedEvent, type EventClaim, type Logger, type Sql, type EventVerifier, type StreamSettings, type Worker } from '@coinvoice/runtime';
import type { NatsConnection } from 'nats';
import { isWebhookEventType, MalformedEventError, webhookForEventJson } from '../domain/payloads';
import type { Reservation } from '../delivery/worker';
import type { Mailer } from '../email';
import type { ProjectContext, ProjectDirectory } from '../project-context';
import { insertEventRows, type DeliveryRow } from '../store/deliveries';

/** The streams the notifier reads, and the durable consumer name on each. */
export const CONSUMED_STREAMS = [
  { service: 'invoice', consumer: 'notifier-invoice-events' },
  { service: 'payout', consumer: 'notifier-payout-events' },
] as const;

export interface NotifierConsumerDeps {
  sql: Sql;
  nats: NatsConnection;
  namespace: string;
  /** The consumed streams' configured shape, for when the notifier is first to create them. */
  stream: StreamSettings;
  /** The invoice and payout services' public keys: unsigned events never become webhooks. */
  verifier: EventVerifier;
  logger: Logger;
  projects: Pick<ProjectDirectory, 'get' | 'current'>;
  mailer: Mailer;
  /** Called after a transaction that queued a delivery of `projectId` committed (wakes this replica's worker). */
  onDeliveryCreated: (projectId: string) => void;
  /** This replica's worker: a slot reserved before the insert lets the delivery go out right after commit. */
  dispatch?: { reserve(projectId: string, url: string): Reservation | undefined };
}

/** What handling an event left to do once its transaction has committed. */
export type HandledEvent =
  | { kind: 'nothing' }
  | { kind: 'queued'; projectId: string }
  | { kind: 'leased'; row: DeliveryRow; context: ProjectContext; reservation: Reservation };

export class NotifierEventHandler {
  constructor(private readonly deps: Omit<NotifierConsumerDeps, 'nats' | 'namespace' | 'stream' | 'verifier'>) {}

  /**
   * Applies the event in ONE statement that also runs `claim` (the consumer's record of it, see
   * IdempotentConsumer's statementHandler): nothing is written unless the claim is. Says whether
   * it was (false: a duplicate) and what is left to do once the statement has run.
   */
  async handle(sql: Sql, event: ConsumedEvent, claim: EventClaim): Promise<{ claimed: boolean; then: HandledEvent }> {
    const nothing = { kind: 'nothing' } as const;
    const claimOnly = async () => ({ claimed: await claimEvent(sql, claim), then: nothing });
    const log = this.deps.logger.child({ eventId: event.id, eventType: event.type });
    let mapping;
    try {
      mapping = webhookForEventJson(event.type, event.payload, occurredAtOf(event));
    } catch (err) {
      if (!(err instanceof MalformedEventError)) throw err;
      // A producer bug: retrying cannot fix it, and it must not hold up the events behind it.
      log.error({ error: err.message }, 'notifier: malformed event skipped; no webhook sent');
      return claimOnly();
    }
    if (mapping.kind === 'not_a_webhook') return claimOnly();

    // The project's URL now: a project without a webhook records nothing to deliver. "No URL" is
    // asked of auth again rather than taken from the cache: nothing would ever send this event if
    // the merchant had just set a URL whose update has not reached us yet.
    const cached = await this.deps.projects.get(mapping.projectId);
    const project = cached !== undefined && cached.webhookUrl === undefined ? await this.deps.projects.current(mapping.projectId) : cached;
    if (project === undefined) {
      log.warn({ projectId: mapping.projectId }, 'notifier: event of a project auth does not know; no webhook');
      return claimOnly();
    }
    const eventRows = { projectId: mapping.projectId, eventId: event.id, eventType: event.type, body: mapping.body };
    // Every webhook event of the project, URL or not, is kept: what `coinvoice listen` streams.
    if (project.webhookUrl === undefined) return { claimed: (await insertEventRows(sql, claim, eventRows)).passed, then: nothing };
    const reservation = this.deps.dispatch?.reserve(mapping.projectId, project.webhookUrl);
    try {
      const { passed, row } = await insertEventRows(sql, claim, eventRows, { eventKey: event.key ?? null, url: project.webhookUrl, lease: reservation });
      if (row) log.debug({ deliveryId: row.id, leased: row.lease_token !== null }, 'notifier: webhook delivery queued');
      if (reservation && row && row.lease_token === reservation.token) return { claimed: passed, then: { kind: 'leased', row, context: project, reservation } };
      reservation?.release();
      return { claimed: passed, then: row ? { kind: 'queued', projectId: mapping.projectId } : nothing };
    } catch (err) {
      reservation?.release();
      throw err;
    }
  }
}

/**
 * When the producer wrote the event (the relay's event-time header, the outbox row's time); a
 * message without a readable one (an old relay) takes the time it is handled here.
 */
function occurredAtOf(event: ConsumedEvent): Date {
  const written = event.occurredAt === undefined ? undefined : new Date(event.occurredAt);
  return written !== undefined && !Number.isNaN(written.getTime()) ? written : new Date();
}

/** One IdempotentConsumer per stream, each creating its stream first (it may not exist yet). */
export function notifierConsumers(deps: NotifierConsumerDeps): Worker[] {
  const namespace = EventNamespace.of(deps.namespace);
  const handler = new NotifierEventHandler(deps);
  return CONSUMED_STREAMS.map(({ service, consumer: name }) => {
    // Handled in a transaction that has not committed yet, by event id.
    const pending = new Map<string, HandledEvent>();
    // The producer's stream: created if missing (it may start later, or its store was lost), never reconfigured.
    const ensureStream = () => ensureServiceStream(deps.nats, { namespace, service, ...deps.stream, reconfigure: false });
    const consumer = new IdempotentConsumer({
      sql: deps.sql,
      nats: deps.nats,
      stream: namespace.streamName(service),
      name,
      filterSubjects: namespace.streamSubjects(service),
      verifier: deps.verifier,
      logger: deps.logger,
      // Webhook events; anything else (payout.verification_code_issued…) is not ours. Codes are emailed by RPC.
      handles: (type) => isWebhookEventType(type),
      statementHandler: async (sql, event, claim) => {
        const previous = pending.get(event.id);
        if (previous?.kind === 'leased') previous.reservation.release(); // an earlier try never got to launch it
        pending.delete(event.id);
        const { claimed, then } = await handler.handle(sql, event, claim);
        if (then.kind !== 'nothing') pending.set(event.id, then);
        return claimed;
      },
      restoreStream: ensureStream,
      afterCommit: (event) => {
        const handled = pending.get(event.id);
        pending.delete(event.id);
        if (handled?.kind === 'leased') handled.reservation.launch(handled.row, handled.context);
        else if (handled?.kind === 'queued') deps.onDeliveryCreated(handled.projectId);
      },
    });
    return {
      async start() {
        // The payout stream exists once the payout service has started; the notifier may be first.
        await ensureStream();
        await consumer.start();
      },
      stop: () => consumer.stop(),
    };
  });
}
