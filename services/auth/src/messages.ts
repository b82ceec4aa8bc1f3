/** Rows of the auth schema as the protobuf messages of auth.proto. */
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  ApiKeySchema,
  JwkSchema,
  MerchantSchema,
  ProjectSchema,
  type ApiKey,
  type Jwk,
  type Merchant,
  type Project,
} from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { environmentFromProto as environmentFromProtoOrUndefined } from '@coinvoice/domain/environment';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import type { Ed25519Jwk } from '@coinvoice/domain/credentials/jwt';
import type { ProjectEnvironment } from '@coinvoice/domain/environment';
import type { ApiKeyRow, MerchantRow, ProjectRow } from './store/rows';

import { environmentToProto } from '@coinvoice/domain/environment';
export { environmentToProto };

/**
 * The request's environment for validation, through the one mapping: UNSPECIFIED becomes
 * undefined ("is required"), an unknown number stays a number ("must be live or sandbox").
 */
export function environmentFromProto(environment: Environment): unknown {
  if (environment === Environment.UNSPECIFIED) return undefined;
  return environmentFromProtoOrUndefined(environment) ?? environment;
}

export function merchantMessage(row: MerchantRow): Merchant {
  return create(MerchantSchema, {
    id: row.id,
    email: row.email,
    name: row.name,
    isAdmin: row.is_operator,
    createdAt: timestampFromDate(row.created_at),
    emailVerified: row.email_verified_at !== null,
  });
}

export function projectMessage(row: ProjectRow): Project {
  const previousUntil = row.previous_webhook_secret_expires_at;
  return create(ProjectSchema, {
    id: row.id,
    merchantId: row.merchant_id,
    name: row.name,
    environment: environmentToProto(row.environment),
    ...(row.webhook_url === null ? {} : { webhookUrl: row.webhook_url }),
    invoiceLifetimeMinutes: row.invoice_lifetime_minutes,
    paymentTolerancePercent: canonicalPercent(row.payment_tolerance_percent),
    createdAt: timestampFromDate(row.created_at),
    // Only replaced secrets still in force count (the store asks Postgres' clock).
    ...(previousUntil === null ? {} : { previousWebhookSecretExpiresAt: timestampFromDate(previousUntil) }),
  });
}

export function apiKeyMessage(row: ApiKeyRow): ApiKey {
  return create(ApiKeySchema, {
    id: row.id,
    projectId: row.project_id,
    name: row.name,
    prefix: row.display_prefix,
    createdAt: timestampFromDate(row.created_at),
    ...(row.revoked_at ? { revokedAt: timestampFromDate(row.revoked_at) } : {}),
    ...(row.last_used_at ? { lastUsedAt: timestampFromDate(row.last_used_at) } : {}),
  });
}

export function jwkMessage(jwk: Ed25519Jwk): Jwk {
  return create(JwkSchema, { kid: jwk.kid, kty: jwk.kty, crv: jwk.crv, x: jwk.x, alg: jwk.alg, use: jwk.use });
}

/** "1.50" (numeric(4,2)) → "1.5"; "0.00" → "0": one spelling per value. */
export function canonicalPercent(stored: string): string {
  return stored.includes('.') ? stored.replace(/0+$/, '').replace(/\.$/, '') : stored;
}
