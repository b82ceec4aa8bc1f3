/** Proto messages → the public JSON shapes. Conversions live here, once. */
import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { ApiKey, Merchant, Project } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';

export function isoTime(ts: Timestamp | undefined): string {
  if (!ts) throw new Error('a required timestamp is missing from a service response');
  return timestampDate(ts).toISOString();
}

export function isoTimeOrNull(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}

export function environmentName(env: Environment): 'live' | 'sandbox' {
  if (env === Environment.LIVE) return 'live';
  if (env === Environment.SANDBOX) return 'sandbox';
  throw new Error(`unexpected environment ${env} in a service response`);
}

export function environmentOf(name: 'live' | 'sandbox'): Environment {
  return name === 'live' ? Environment.LIVE : Environment.SANDBOX;
}

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`${what} is missing from a service response`);
  return value;
}

export function merchantJson(m: Merchant | undefined) {
  const merchant = required(m, 'merchant');
  return { id: merchant.id, email: merchant.email, name: merchant.name, isAdmin: merchant.isAdmin, createdAt: isoTime(merchant.createdAt) };
}

export function projectJson(p: Project | undefined) {
  const project = required(p, 'project');
  return {
    id: project.id,
    name: project.name,
    environment: environmentName(project.environment),
    webhookUrl: project.webhookUrl ?? null,
    invoiceLifetimeMinutes: project.invoiceLifetimeMinutes,
    createdAt: isoTime(project.createdAt),
  };
}

export function apiKeyJson(k: ApiKey | undefined) {
  const key = required(k, 'apiKey');
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    createdAt: isoTime(key.createdAt),
    revokedAt: isoTimeOrNull(key.revokedAt),
    lastUsedAt: isoTimeOrNull(key.lastUsedAt),
  };
}
