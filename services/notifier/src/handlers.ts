/**
 * coinvoice.notifier.v1.NotifierService: the webhook delivery log. Error codes per RPC
 * (ErrorDetail.code, Connect code):
 * - ListWebhookDeliveries: validation_failed (projectId, status, eventType, pageSize, cursor).
 * - GetWebhookDelivery: validation_failed, not_found (also for a delivery of another project).
 * - RedeliverWebhook: validation_failed, not_found, webhook_not_configured (FailedPrecondition)
 *   when the project has no webhook URL now. Auth unreachable: unavailable.
 * The caller (the gateway) has checked that the project is the merchant's.
 */
import type { DescMessage, MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ServiceImpl } from '@connectrpc/connect';
import { errors, type Logger, type Sql, type Violation } from '@coinvoice/runtime';
import {
  DeliveryStatus,
  type GetWebhookDeliveryRequest,
  type GetWebhookDeliveryResponseSchema,
  type ListWebhookDeliveriesRequest,
  type ListWebhookDeliveriesResponseSchema,
  type NotifierService,
  type RedeliverWebhookRequest,
  type RedeliverWebhookResponseSchema,
  type WebhookAttemptSchema,
  type WebhookDeliverySchema,
} from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import type { DeliveryState } from './domain/delivery-state';
import type { ProjectDirectory } from './project-context';
import {
  findDelivery,
  findEndpoint,
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
  projects: ProjectDirectory;
  logger: Logger;
  /** Wakes this replica's worker after a redelivery committed. */
  onDeliveryCreated?: () => void;
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
    if (req.pageSize < 0 || req.pageSize > MAX_PAGE_SIZE) violations.push({ field: 'pageSize', message: `must be from 1 to ${MAX_PAGE_SIZE}` });
    const beforeSeq = req.cursor === '' ? undefined : decodeCursor(req.cursor);
    if (beforeSeq === null) violations.push({ field: 'cursor', message: 'is not a valid cursor' });
    if (violations.length > 0) throw invalid(violations);

    const limit = req.pageSize === 0 ? DEFAULT_PAGE_SIZE : req.pageSize;
    const [rows, project] = await Promise.all([
      listDeliveries(this.deps.sql, { projectId: req.projectId, status, eventType: req.eventType, beforeSeq: beforeSeq ?? undefined, limit }),
      this.deps.projects.get(req.projectId),
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
    };
  }

  async getWebhookDelivery(req: GetWebhookDeliveryRequest): Reply<typeof GetWebhookDeliveryResponseSchema> {
    const row = await this.find(req.projectId, req.deliveryId);
    const attempts = await listAttempts(this.deps.sql, row.id);
    return { delivery: deliveryMessage(row), attempts: attempts.map(attemptMessage) };
  }

  async redeliverWebhook(req: RedeliverWebhookRequest): Reply<typeof RedeliverWebhookResponseSchema> {
    const original = await this.find(req.projectId, req.deliveryId);
    const project = await this.deps.projects.get(req.projectId);
    if (project?.webhookUrl === undefined) {
      throw errors.conflict('webhook_not_configured', 'the project has no webhook URL: set one before redelivering');
    }
    const url = project.webhookUrl;
    const row = await this.deps.sql.begin((tx) => insertRedelivery(tx, original, url));
    this.deps.onDeliveryCreated?.();
    this.deps.logger.info({ deliveryId: row.id, redeliveryOf: original.id, eventId: row.event_id }, 'notifier: redelivery queued');
    return { delivery: deliveryMessage(row) };
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
  };
}
