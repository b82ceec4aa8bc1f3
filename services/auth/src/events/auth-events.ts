/**
 * The events the auth service publishes, built as protobuf messages (events.proto) and written to
 * the outbox as JSON (`toJson`). Types are `auth.<snake_name>`: the auth stream holds subjects
 * `<ns>.auth.>`, so the gateway subscribes to `<ns>.auth.api_key_revoked`.
 */
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { NewEvent } from '@coinvoice/runtime';
import { ApiKeyRevokedSchema, ProjectUpdatedSchema, SessionsRevokedSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/events_pb';
import { canonicalPercent } from '../messages';
import type { ProjectRow } from '../store/rows';

export const AUTH_EVENT_TYPES = {
  apiKeyRevoked: 'auth.api_key_revoked',
  projectUpdated: 'auth.project_updated',
  sessionsRevoked: 'auth.sessions_revoked',
} as const;

/** Every session of the merchant older than `minSessionEpoch` ended: gateways refuse those tokens now. */
export function sessionsRevokedEvent(input: { merchantId: string; minSessionEpoch: number; revokedAt: Date }): NewEvent {
  const message = create(SessionsRevokedSchema, {
    merchantId: input.merchantId,
    minSessionEpoch: input.minSessionEpoch,
    revokedAt: timestampFromDate(input.revokedAt),
  });
  return { type: AUTH_EVENT_TYPES.sessionsRevoked, key: input.merchantId, payload: toJson(SessionsRevokedSchema, message) };
}

/** A key was revoked: every gateway drops its cached verification (keyed by `keyHash`). */
export function apiKeyRevokedEvent(input: { keyId: string; projectId: string; keyHash: string; revokedAt: Date }): NewEvent {
  const message = create(ApiKeyRevokedSchema, {
    keyId: input.keyId,
    projectId: input.projectId,
    keyHash: input.keyHash,
    revokedAt: timestampFromDate(input.revokedAt),
  });
  return { type: AUTH_EVENT_TYPES.apiKeyRevoked, key: input.keyId, payload: toJson(ApiKeyRevokedSchema, message) };
}

/** A project's settings or webhook secret changed (the secret itself is never in the event). */
export function projectUpdatedEvent(project: ProjectRow, options: { webhookSecretRotated: boolean }): NewEvent {
  const message = create(ProjectUpdatedSchema, {
    projectId: project.id,
    merchantId: project.merchant_id,
    name: project.name,
    ...(project.webhook_url === null ? {} : { webhookUrl: project.webhook_url }),
    invoiceLifetimeMinutes: project.invoice_lifetime_minutes,
    paymentTolerancePercent: canonicalPercent(project.payment_tolerance_percent),
    webhookSecretRotated: options.webhookSecretRotated,
    updatedAt: timestampFromDate(project.updated_at),
  });
  return { type: AUTH_EVENT_TYPES.projectUpdated, key: project.id, payload: toJson(ProjectUpdatedSchema, message) };
}
