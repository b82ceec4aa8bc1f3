/**
 * The developer `npm start` hands a newcomer: a merchant, its sandbox project and a fresh sandbox
 * API key, made by the auth service itself (a command run next to the database, like
 * grant-operator), never through the public, per-IP rate-limited POST /api/merchant/register: a
 * machine that registered a few test accounts this hour must still start.
 *
 *   LOCAL_DEVELOPER_PASSWORD=… node services/auth/dist/main.js local-developer <email>
 *
 * Reuses the merchant with that email (its password unchanged) and its oldest sandbox project;
 * prints one JSON line {merchantId, projectId, apiKey}. Development only: refused with
 * APP_ENV=production.
 */
import type { SecretBox } from '@coinvoice/domain/secrets-at-rest';
import type { Sql } from '@coinvoice/runtime';
import type { PasswordHasher } from '../domain/passwords';
import { checkEmail, checkNewPassword } from '../domain/validation';
import { generateWebhookSecret } from '../domain/webhook-secrets';
import { issueApiKey } from '@coinvoice/domain/credentials/api-keys';
import { ApiKeyStore } from '../store/api-keys';
import { MerchantStore } from '../store/merchants';
import { ProjectStore } from '../store/projects';

export interface LocalDeveloper {
  merchantId: string;
  projectId: string;
  /** Plain key, shown once: only its hash is stored. */
  apiKey: string;
}

export type LocalDeveloperOutcome = { ok: true; developer: LocalDeveloper } | { ok: false; reason: string };

export const LOCAL_DEVELOPER_NAME = 'Local developer';
export const LOCAL_DEVELOPER_PROJECT = 'Sandbox';
export const LOCAL_DEVELOPER_KEY_NAME = 'npm start';

export async function ensureLocalDeveloper(
  sql: Sql,
  deps: { box: SecretBox; passwords: PasswordHasher },
  input: { email: string; password: string },
): Promise<LocalDeveloperOutcome> {
  // Every `npm start` issues a key: the API's caps (MAX_ACTIVE_API_KEYS_PER_PROJECT) are for the
  // public API, not this local command, which must never stop a start.
  const UNCAPPED = Number.MAX_SAFE_INTEGER;
  const email = checkEmail(input.email);
  if (!email.ok) return { ok: false, reason: `"${input.email}" ${email.message}` };
  const password = checkNewPassword(input.password);
  if (!password.ok) return { ok: false, reason: `LOCAL_DEVELOPER_PASSWORD ${password.message}` };
  const merchants = new MerchantStore(sql);
  const projects = new ProjectStore(sql, deps.box);
  const merchant =
    (await merchants.findByEmail(email.value)) ??
    (await merchants.create({ email: email.value, name: LOCAL_DEVELOPER_NAME, passwordHash: await deps.passwords.hash(password.value) })) ??
    // Registered meanwhile by someone else with the same email: take that account.
    (await merchants.findByEmail(email.value));
  if (!merchant) return { ok: false, reason: `could not create the merchant ${email.value}` };
  const existing = (await projects.listByMerchant(merchant.id)).find((p) => p.environment === 'sandbox');
  const project =
    existing ??
    (await projects.create({
      merchantId: merchant.id,
      name: LOCAL_DEVELOPER_PROJECT,
      environment: 'sandbox',
      webhookUrl: null,
      webhookSecret: generateWebhookSecret(),
      paymentTolerancePercent: '0',
    }, UNCAPPED));
  if (!project || project === 'limit_reached') return { ok: false, reason: `could not create a sandbox project for ${email.value}` };
  const issued = issueApiKey('sandbox');
  await new ApiKeyStore(sql).create({ projectId: project.id, name: LOCAL_DEVELOPER_KEY_NAME, keyHash: issued.hash, displayPrefix: issued.displayPrefix }, UNCAPPED);
  return { ok: true, developer: { merchantId: merchant.id, projectId: project.id, apiKey: issued.key } };
}
