/** Proto messages → the public JSON shapes. Conversions live here, once. */
import { environmentToProto, requireEnvironment, type ProjectEnvironment } from '@coinvoice/domain/environment';
import { decimalToJsonNumber } from '@coinvoice/domain/json-money';
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

/** A service answer's environment; unspecified or unknown is a bug upstream, never guessed (throws). */
export function environmentName(env: Environment): ProjectEnvironment {
  return requireEnvironment(env, 'a service response');
}

export const environmentOf = environmentToProto;

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`${what} is missing from a service response`);
  return value;
}

export function merchantJson(m: Merchant | undefined) {
  const merchant = required(m, 'merchant');
  return {
    id: merchant.id,
    email: merchant.email,
    name: merchant.name,
    isAdmin: merchant.isAdmin,
    createdAt: isoTime(merchant.createdAt),
    emailVerified: merchant.emailVerified,
  };
}

export function projectJson(p: Project | undefined) {
  const project = required(p, 'project');
  return {
    id: project.id,
    name: project.name,
    environment: environmentName(project.environment),
    webhookUrl: project.webhookUrl ?? null,
    invoiceLifetimeMinutes: project.invoiceLifetimeMinutes,
    paymentTolerancePercent: decimalToJsonNumber(project.paymentTolerancePercent || '0'),
    previousWebhookSecretExpiresAt: isoTimeOrNull(project.previousWebhookSecretExpiresAt),
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

/**
 * A proto enum and its public spelling, written once. `name` turns a service's value into the
 * public word (an unexpected value is a bug upstream, never something to show a client); `value`
 * turns a filter a client sent (already schema-validated) back into the enum.
 */
export function publicNames<N extends string>(what: string, pairs: ReadonlyArray<readonly [number, N]>) {
  const names = new Map<number, N>(pairs);
  const values = new Map<string, number>(pairs.map(([value, name]) => [name, value]));
  return {
    name(value: number): N {
      const name = names.get(value);
      if (name === undefined) throw new Error(`unexpected ${what} ${value} in a service response`);
      return name;
    },
    value(name: N): number {
      const value = values.get(name);
      if (value === undefined) throw new Error(`unknown ${what} ${name}`);
      return value;
    },
  };
}
