/**
 * coinvoice.notifier.v1.NotifierService: the webhook delivery log. Error codes per RPC
 * (ErrorDetail.code, Connect code):
 * - ListWebhookDeliveries: validation_failed (projectId, status, eventType, pageSize, cursor).
 * - GetWebhookDelivery: validation_failed, not_found (also for a delivery of another project).
 * - RedeliverWebhook: validation_failed, not_found, webhook_not_configured (FailedPrecondition)
 *   when the project has no webhook URL now. Auth unreachable: unavailable.
 * - SendTestWebhook: validation_failed (projectId, eventType: naming every valid type),
 *   not_found (auth does not know the project), rate_limited (ResourceExhausted: more than
 *   RATE_LIMIT_WEBHOOK_TEST_PER_PROJECT, counted in Postgres across replicas). A project without
 *   a webhook URL gets the event in its event stream only (no delivery).
 * - ListProjectEvents: validation_failed (projectId, cursor, pageSize), not_found (project).
 * The caller (the gateway) has checked that the project is the merchant's.
 */
import { randomUUID } from 'node:crypto';
import type { DescMessage, MessageInitShape } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ServiceImpl } from '@connectrpc/connect';
import { parseEventStreamCursor } from '@coinvoice/domain/event-stream-cursor';
import { enforceRateLimit, errors, type Logger, type RateLimitPolicy, type RateLimitStore, type Sql, type Violation } from '@coinvoice/runtime';
import {
  DeliveryStatus,
  type GetWebhookDeliveryRequest,
  type GetWebhookDeliveryResponseSchema,
  type ListWebhookDeliveriesRequest,
  type ListProjectEventsRequest,
  type ListProjectEventsResponseSchema,
  type ListWebhookDeliveriesResponseSchema,
  type NotifierService,
  type RedeliverWebhookRequest,
  type RedeliverWebhookResponseSchema,
  type SendEmailVerificationEmailRequest,
  type SendEmailVerificationEmailResponseSchema,
  type SendAutoSweepVerificationEmailRequest,
  type SendAutoSweepVerificationEmailResponseSchema,
  type SendPayoutVerificationEmailRequest,
  type SendPayoutVerificationEmailResponseSchema,
  type SendSignUpAttemptEmailRequest,
  type SendSignUpAttemptEmailResponseSchema,
  type SendTestWebhookRequest,
  type SendTestWebhookResponseSchema,
  type WebhookAttemptSchema,
  type WebhookDeliverySchema,
} from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import type { DeliveryState } from './domain/delivery-state';
import { autoSweepVerificationEmail, emailVerificationEmail, payoutVerificationEmail, signUpAttemptEmail, type Mailer } from './email';
import { isTestEventType, PING_TEST_EVENT_TYPE, TEST_EVENT_TYPES, testEventBody } from './domain/test-events';
import { signingSecrets, webhookDeliveryHeaders } from './domain/signing';
import type { ProjectDirectory } from './project-context';
import { currentProjectEventPosition, listProjectEvents, positionOfSeq } from './store/project-events';
import type { ListenCursors, ListenPosition } from './listen-cursors';
import {
  findDelivery,
  findEndpoint,
  insertEventRows,
  insertRedelivery,
  listAttempts,
  listDeliveries,
  type AttemptRow,
  type DeliveryRow,
} from './store/deliveries';

type Reply<Schema extends DescMessage> = Promise<MessageInitShape<Schema>>;

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const EVENT_TYPE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;

const STATE_OF_STATUS: Partial<Record<DeliveryStatus, DeliveryState>> = {
  [DeliveryStatus.PENDING]: 'pending',
  [DeliveryStatus.SUCCEEDED]: 'succeeded',
  [DeliveryStatus.FAILED]: 'failed',
};
const STATUS_OF_STATE: Record<DeliveryState, DeliveryStatus> = {
  pending: DeliveryStatus.PENDING,
  succeeded: DeliveryStatus.SUCCEEDED,
  failed: DeliveryStatus.FAILED,
};

export interface NotifierHandlerDeps {
  sql: Sql;
  projects: Pick<ProjectDirectory, 'current'>;
  logger: Logger;
  /** Sends the codes' emails (SMTP, or the development mailbox folder). */
  mailer: Mailer;
  /** WEBHOOK_LOG_RETENTION_DAYS, told to the dashboard with each delivery list. */
  logRetentionDays: number;
  /** Wakes this replica's worker after a redelivery committed. */
  onDeliveryCreated?: () => void;
  /** The limit of test events per project (each one is a delivery that takes a slot). */
  testEvents: { store: RateLimitStore; perProject: RateLimitPolicy; redeliveriesPerProject: RateLimitPolicy };
  /** Seals and opens listen cursors (docs/webhook-delivery.md#the-listen-stream). */
  listenCursors: ListenCursors;
}

export class NotifierHandlers implements ServiceImpl<typeof NotifierService> {
  constructor(private readonly deps: NotifierHandlerDeps) {}

  async listWebhookDeliveries(req: ListWebhookDeliveriesRequest): Reply<typeof ListWebhookDeliveriesResponseSchema> {
    const violations: Violation[] = [];
    checkUuid(violations, 'projectId', req.projectId);
    let status: DeliveryState | undefined;
    if (req.status !== undefined) {
      status = STATE_OF_STATUS[req.status];
      if (status === undefined) violations.push({ field: 'status', message: 'must be pending, succeeded or failed' });
    }
    if (req.eventType !== undefined && (req.eventType.length > 100 || !EVENT_TYPE.test(req.eventType))) {
      violations.push({ field: 'eventType', message: 'must be an event type like invoice.paid' });
    }
    if (req.invoiceId !== undefined) checkUuid(violations, 'invoiceId', req.invoiceId);
    if (req.pageSize < 0 || req.pageSize > MAX_PAGE_SIZE) violations.push({ field: 'pageSize', message: `must be from 1 to ${MAX_PAGE_SIZE}` });
    const beforeSeq = req.cursor === '' ? undefined : decodeCursor(req.cursor);
    if (beforeSeq === null) violations.push({ field: 'cursor', message: 'is not a valid cursor' });
    if (violations.length > 0) throw invalid(violations);

    const limit = req.pageSize === 0 ? DEFAULT_PAGE_SIZE : req.pageSize;
    const [rows, project] = await Promise.all([
      listDeliveries(this.deps.sql, {
        projectId: req.projectId,
        status,
        eventType: req.eventType,
        invoiceId: req.invoiceId?.toLowerCase(),
        beforeSeq: beforeSeq ?? undefined,
        limit,
      }),
      this.deps.projects.current(req.projectId),
    ]);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const url = project?.webhookUrl ?? '';
    const endpoint = url === '' ? undefined : await findEndpoint(this.deps.sql, req.projectId, url);
    return {
      deliveries: page.map(deliveryMessage),
      nextCursor: rows.length > limit && last ? encodeCursor(last.seq) : '',
      endpointHealth: {
        url,
        lastSuccessAt: endpoint?.last_success_at ? timestampFromDate(endpoint.last_success_at) : undefined,
        consecutiveFailures: endpoint?.consecutive_failures ?? 0,
      },
      logRetentionDays: this.deps.logRetentionDays,
    };
  }

  async getWebhookDelivery(req: GetWebhookDeliveryRequest): Reply<typeof GetWebhookDeliveryResponseSchema> {
    const row = await this.find(req.projectId, req.deliveryId);
    const attempts = await listAttempts(this.deps.sql, row.id);
    return { delivery: deliveryMessage(row), attempts: attempts.map(attemptMessage) };
  }

  async redeliverWebhook(req: RedeliverWebhookRequest): Reply<typeof RedeliverWebhookResponseSchema> {
    const original = await this.find(req.projectId, req.deliveryId);
    const project = await this.deps.projects.current(req.projectId);
    if (project?.webhookUrl === undefined) {
      throw errors.conflict('webhook_not_configured', 'the project has no webhook URL: set one before redelivering');
    }
    const url = project.webhookUrl;
    await enforceRateLimit(this.deps.testEvents.store, this.deps.testEvents.redeliveriesPerProject, original.project_id.toLowerCase());
    const row = await this.deps.sql.begin((tx) => insertRedelivery(tx, original, url));
    this.deps.onDeliveryCreated?.();
    this.deps.logger.info({ deliveryId: row.id, redeliveryOf: original.id, eventId: row.event_id }, 'notifier: redelivery queued');
    return { delivery: deliveryMessage(row) };
  }

  // The code emails: the code is in the request and the email only, never stored or logged.

  async sendPayoutVerificationEmail(req: SendPayoutVerificationEmailRequest): Reply<typeof SendPayoutVerificationEmailResponseSchema> {
    checkCodeEmail(req.email, req.code);
    if (req.expiresAt && timestampDate(req.expiresAt).getTime() <= Date.now()) {
      throw errors.conflict('verification_code_expired', 'the code expired before it could be emailed; not sent');
    }
    const sent = await this.deps.mailer.send(payoutVerificationEmail(req));
    this.deps.logger.info({ payoutId: req.payoutId, messageId: sent.messageId }, 'notifier: payout verification email sent');
    return { messageId: sent.messageId };
  }

  async sendAutoSweepVerificationEmail(req: SendAutoSweepVerificationEmailRequest): Reply<typeof SendAutoSweepVerificationEmailResponseSchema> {
    checkCodeEmail(req.email, req.code);
    if (req.destinations.length === 0) throw invalid([{ field: 'destinations', message: 'must name at least one destination' }]);
    if (req.expiresAt && timestampDate(req.expiresAt).getTime() <= Date.now()) {
      throw errors.conflict('verification_code_expired', 'the code expired before it could be emailed; not sent');
    }
    const sent = await this.deps.mailer.send(autoSweepVerificationEmail(req));
    this.deps.logger.info({ projectId: req.projectId, messageId: sent.messageId }, 'notifier: auto-sweep verification email sent');
    return { messageId: sent.messageId };
  }

  async sendEmailVerificationEmail(req: SendEmailVerificationEmailRequest): Reply<typeof SendEmailVerificationEmailResponseSchema> {
    checkCodeEmail(req.email, req.code);
    const sent = await this.deps.mailer.send(emailVerificationEmail(req));
    this.deps.logger.info({ messageId: sent.messageId }, 'notifier: email verification code sent');
    return { messageId: sent.messageId };
  }

  async sendSignUpAttemptEmail(req: SendSignUpAttemptEmailRequest): Reply<typeof SendSignUpAttemptEmailResponseSchema> {
    const violations: Violation[] = [];
    checkEmailAddress(violations, req.email);
    if (violations.length > 0) throw invalid(violations);
    const sent = await this.deps.mailer.send(signUpAttemptEmail(req));
    this.deps.logger.info({ messageId: sent.messageId }, 'notifier: sign-up attempt email sent');
    return { messageId: sent.messageId };
  }

  async sendTestWebhook(req: SendTestWebhookRequest): Reply<typeof SendTestWebhookResponseSchema> {
    const violations: Violation[] = [];
    checkUuid(violations, 'projectId', req.projectId);
    const requested = req.eventType === '' ? PING_TEST_EVENT_TYPE : req.eventType;
    const eventType = isTestEventType(requested) ? requested : undefined;
    if (eventType === undefined) violations.push({ field: 'eventType', message: `must be one of ${TEST_EVENT_TYPES.join(', ')}` });
    if (violations.length > 0 || eventType === undefined) throw invalid(violations);
    const project = await this.deps.projects.current(req.projectId);
    if (!project) throw errors.notFound('project');
    await enforceRateLimit(this.deps.testEvents.store, this.deps.testEvents.perProject, project.projectId.toLowerCase());
    const eventId = randomUUID();
    const body = testEventBody(eventType, project, eventId, new Date());
    const url = project.webhookUrl;
    // Like a consumed event: in the project's events (`coinvoice listen`) and, with a URL, queued.
    // An event of its own (no ordering key): signed, sent, retried and logged like every other.
    const { row } = await insertEventRows(
      this.deps.sql,
      this.deps.sql`select`,
      { projectId: project.projectId, eventId, eventType, body },
      url === undefined ? undefined : { eventKey: null, url },
    );
    if (url !== undefined && !row) throw new Error('a new test event already had a delivery');
    if (row) this.deps.onDeliveryCreated?.();
    this.deps.logger.info({ deliveryId: row?.id, eventId, eventType, projectId: project.projectId }, 'notifier: test event queued');
    return { delivery: row ? deliveryMessage(row) : undefined, eventId, eventType, body };
  }

  async listProjectEvents(req: ListProjectEventsRequest): Reply<typeof ListProjectEventsResponseSchema> {
    const violations: Violation[] = [];
    checkUuid(violations, 'projectId', req.projectId);
    const cursor = req.cursor === undefined ? undefined : parseEventStreamCursor(req.cursor);
    // A token this notifier did not seal for this project (another project's, another key's) is no cursor.
    const sealed = cursor?.kind === 'token' ? this.deps.listenCursors.open(req.projectId, cursor.token) : undefined;
    if (req.cursor !== undefined && (!cursor || (cursor.kind === 'token' && !sealed))) violations.push({ field: 'cursor', message: 'is not a valid cursor' });
    if (req.pageSize < 0 || req.pageSize > MAX_PAGE_SIZE) violations.push({ field: 'pageSize', message: `must be from 1 to ${MAX_PAGE_SIZE}` });
    if (violations.length > 0) throw invalid(violations);
    const project = await this.deps.projects.current(req.projectId);
    if (!project) throw errors.notFound('project');
    const seal = (position: ListenPosition) => this.deps.listenCursors.seal(req.projectId, position);
    if (!cursor) return { events: [], cursor: seal(await currentProjectEventPosition(this.deps.sql)) };
    const after = sealed ?? (await positionOfSeq(this.deps.sql, req.projectId, (cursor as { seq: string }).seq));

    const rows = await listProjectEvents(this.deps.sql, { projectId: req.projectId, after, limit: req.pageSize === 0 ? DEFAULT_PAGE_SIZE : req.pageSize });
    const now = new Date();
    return {
      // Signed with the secrets in force, at the time the event was recorded: a stream hands its
      // key's holder signatures, and a fresh timestamp would make a day's events replayable to the
      // merchant's endpoint past its timestamp check (a second review). A listener's event is
      // seconds old; one resumed after the endpoint's tolerance is refused there, as a replay is.
      events: rows.map((row) => ({
        eventId: row.event_id,
        eventType: row.event_type,
        headers: webhookDeliveryHeaders({ id: row.event_id, eventType: row.event_type, timestamp: row.created_at, body: row.body, secrets: signingSecrets(project, now) }),
        body: row.body,
        cursor: seal(row),
      })),
      cursor: seal(rows.at(-1) ?? after),
    };
  }

  private async find(projectId: string, deliveryId: string): Promise<DeliveryRow> {
    const violations: Violation[] = [];
    checkUuid(violations, 'projectId', projectId);
    checkUuid(violations, 'deliveryId', deliveryId);
    if (violations.length > 0) throw invalid(violations);
    const row = await findDelivery(this.deps.sql, projectId, deliveryId);
    if (!row) throw errors.notFound('webhook delivery');
    return row;
  }
}

/** Syntax only (the caller is a service that read the address from auth); the code is never echoed. */
function checkCodeEmail(email: string, code: string): void {
  const violations: Violation[] = [];
  checkEmailAddress(violations, email);
  if (!/^\d{6}$/.test(code)) violations.push({ field: 'code', message: 'must be 6 digits' });
  if (violations.length > 0) throw invalid(violations);
}

function checkEmailAddress(violations: Violation[], email: string): void {
  if (!/^[^\s@]+@[^\s@]+$/.test(email) || email.length > 254) violations.push({ field: 'email', message: 'must be an email address' });
}

function checkUuid(violations: Violation[], field: string, value: string): void {
  if (!UUID.test(value)) violations.push({ field, message: 'must be a UUID' });
}

function invalid(violations: Violation[]) {
  return errors.validation(violations, `the request is invalid: ${violations.map((v) => `${v.field} ${v.message}`).join('; ')}`);
}

/** Opaque to clients: base64url of "d1:<seq>". */
export function encodeCursor(seq: string): string {
  return Buffer.from(`d1:${seq}`, 'utf8').toString('base64url');
}

/** The seq, or null when the cursor is not one of ours. */
export function decodeCursor(raw: string): string | null {
  if (raw.length > 64 || !/^[A-Za-z0-9_-]+$/.test(raw)) return null;
  const match = /^d1:([1-9]\d{0,17})$/.exec(Buffer.from(raw, 'base64url').toString('utf8'));
  return match?.[1] ?? null;
}

export function deliveryMessage(row: DeliveryRow): MessageInitShape<typeof WebhookDeliverySchema> {
  return {
    id: row.id,
    projectId: row.project_id,
    eventId: row.event_id,
    eventType: row.event_type,
    url: row.url,
    status: STATUS_OF_STATE[row.status],
    attemptCount: row.attempt_count,
    nextAttemptAt: row.status === 'pending' && row.next_attempt_at ? timestampFromDate(row.next_attempt_at) : undefined,
    createdAt: timestampFromDate(row.created_at),
    redeliveryOf: row.redelivery_of ?? undefined,
    deliveredBy: row.delivered_by ?? undefined,
    payload: row.body,
    lastResponseStatus: row.last_response_status ?? undefined,
  };
}

function attemptMessage(row: AttemptRow): MessageInitShape<typeof WebhookAttemptSchema> {
  return {
    attemptNumber: row.attempt_number,
    attemptedAt: timestampFromDate(row.attempted_at),
    requestHeaders: row.request_headers,
    requestBody: row.request_body,
    responseStatus: row.response_status ?? undefined,
    responseBodyExcerpt: row.response_body_excerpt,
    durationMs: row.duration_ms,
    error: row.error ?? undefined,
    detailsRemovedAt: row.details_removed_at ? timestampFromDate(row.details_removed_at) : undefined,
  };
}
