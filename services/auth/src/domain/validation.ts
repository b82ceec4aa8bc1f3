/**
 * Input rules for the auth service's requests. Violations name the PUBLIC JSON fields (email,
 * password, name, environment, webhookUrl, invoiceLifetimeMinutes) so the gateway can put them
 * straight into the problem+json `errors` array. Inputs are `unknown` because the service checks
 * them again whatever the caller (gateway JSON schema or a direct gRPC client) already did.
 */
import { bidiControlViolation } from '@coinvoice/runtime';
import { isWellFormedOneTimeCode } from '@coinvoice/domain/credentials/one-time-code';
import { isProjectEnvironment, type ProjectEnvironment } from '@coinvoice/domain/environment';
import { PASSWORD_MAX_LENGTH, passwordPolicyViolation } from './passwords';

export interface FieldViolation {
  field: string;
  message: string;
}

export type Validated<T> = { ok: true; value: T } | { ok: false; violations: FieldViolation[] };

/** One field's outcome: the cleaned value, or why it was refused. */
export type FieldCheck<T> = { ok: true; value: T } | { ok: false; message: string };

export const EMAIL_MAX_LENGTH = 254;
export const NAME_MAX_LENGTH = 100;
export const WEBHOOK_URL_MAX_LENGTH = 2048;
export const INVOICE_LIFETIME_MIN_MINUTES = 5;
/** One week. */
export const INVOICE_LIFETIME_MAX_MINUTES = 10_080;
/** A new project's invoice lifetime (auth.proto Project.invoice_lifetime_minutes). */
export const DEFAULT_INVOICE_LIFETIME_MINUTES = 60;

// ---------------------------------------------------------------------------------------------
// Single fields

/** The form emails are stored and compared in: trimmed and lowercased (unique case-insensitively). */
export function normaliseEmail(raw: string): string {
  return raw.trim().toLowerCase();
}

const EMAIL_LOCAL_PART = /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const DOMAIN_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * A normalised, plausible address: ASCII dot-atom local part (<= 64), a domain of at least two
 * DNS labels with a non-numeric top level, <= 254 in total. Deliverability is not our business.
 */
export function checkEmail(raw: unknown): FieldCheck<string> {
  if (raw === undefined || raw === null || raw === '') return refuse('is required');
  if (typeof raw !== 'string') return refuse('must be a string');
  const email = normaliseEmail(raw);
  if (email.length > EMAIL_MAX_LENGTH) return refuse(`must be at most ${EMAIL_MAX_LENGTH} characters`);
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  const labels = email.slice(at + 1).split('.');
  const valid =
    at > 0 &&
    local.length <= 64 &&
    EMAIL_LOCAL_PART.test(local) &&
    labels.length >= 2 &&
    labels.every((label) => DOMAIN_LABEL.test(label)) &&
    !/^[0-9]+$/.test(labels[labels.length - 1] ?? '');
  return valid ? { ok: true, value: email } : refuse('must be a valid email address');
}

/** A new password under the policy (8–128 characters). Never trimmed: spaces are part of it. */
export function checkNewPassword(raw: unknown): FieldCheck<string> {
  if (raw === undefined || raw === null || raw === '') return refuse('is required');
  if (typeof raw !== 'string') return refuse('must be a string');
  const violation = passwordPolicyViolation(raw);
  return violation ? refuse(violation) : { ok: true, value: raw };
}

/** A password presented at login: only presence and the length cap (old policies stay loggable). */
export function checkLoginPassword(raw: unknown): FieldCheck<string> {
  if (raw === undefined || raw === null || raw === '') return refuse('is required');
  if (typeof raw !== 'string') return refuse('must be a string');
  if ([...raw].length > PASSWORD_MAX_LENGTH) return refuse(`must be at most ${PASSWORD_MAX_LENGTH} characters`);
  return { ok: true, value: raw };
}

/** A merchant, project or API key name: trimmed, 1–100 characters, no control or bidi control characters. */
export function checkName(raw: unknown): FieldCheck<string> {
  if (raw === undefined || raw === null) return refuse('is required');
  if (typeof raw !== 'string') return refuse('must be a string');
  const name = raw.trim();
  if (name === '') return refuse('must not be empty');
  if ([...name].length > NAME_MAX_LENGTH) return refuse(`must be at most ${NAME_MAX_LENGTH} characters`);
  if (/\p{Cc}/u.test(name)) return refuse('must not contain control characters');
  const bidi = bidiControlViolation(name);
  if (bidi) return refuse(bidi);
  return { ok: true, value: name };
}

export function checkEnvironment(raw: unknown): FieldCheck<ProjectEnvironment> {
  if (raw === undefined || raw === null || raw === '') return refuse('is required');
  return isProjectEnvironment(raw) ? { ok: true, value: raw } : refuse('must be "live" or "sandbox"');
}

/**
 * An absolute http(s) URL of at most 2048 characters without credentials (they would end up in
 * logs and delivery records). Private/loopback destinations are the notifier's SSRF check, which
 * needs DNS and the deployment mode.
 */
export function checkWebhookUrl(raw: unknown): FieldCheck<string> {
  if (typeof raw !== 'string') return refuse('must be a string');
  if (raw.length > WEBHOOK_URL_MAX_LENGTH) return refuse(`must be at most ${WEBHOOK_URL_MAX_LENGTH} characters`);
  // The URL parser would silently strip surrounding whitespace and some control characters.
  if (/[\s\p{Cc}]/u.test(raw)) return refuse('must not contain spaces or control characters');
  const url = URL.parse(raw);
  if (!url) return refuse('must be an absolute URL');
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return refuse('must be an http or https URL');
  if (url.username !== '' || url.password !== '') return refuse('must not contain credentials');
  if (url.hostname === '') return refuse('must have a host');
  return { ok: true, value: raw };
}

export function checkInvoiceLifetimeMinutes(raw: unknown): FieldCheck<number> {
  if (typeof raw !== 'number' || !Number.isInteger(raw)) return refuse('must be an integer');
  if (raw < INVOICE_LIFETIME_MIN_MINUTES || raw > INVOICE_LIFETIME_MAX_MINUTES) {
    return refuse(`must be between ${INVOICE_LIFETIME_MIN_MINUTES} and ${INVOICE_LIFETIME_MAX_MINUTES}`);
  }
  return { ok: true, value: raw };
}

/** A project's payment tolerance: a decimal string from 0 to 5 with at most 2 decimals. */
export function checkPaymentTolerancePercent(raw: unknown): FieldCheck<string> {
  if (typeof raw !== 'string' || !/^\d{1,2}(\.\d{1,2})?$/.test(raw)) return refuse('must be a number from 0 to 5 with at most 2 decimals');
  if (Number(raw) > 5) return refuse('must be between 0 and 5');
  return { ok: true, value: raw };
}

// ---------------------------------------------------------------------------------------------
// Requests

export interface RegistrationInput {
  email: string;
  password: string;
  name: string;
}

export function validateRegistration(input: { email?: unknown; password?: unknown; name?: unknown }): Validated<RegistrationInput> {
  const fields = new FieldCollector();
  const email = fields.take('email', checkEmail(input.email));
  const password = fields.take('password', checkNewPassword(input.password));
  const name = fields.take('name', checkName(input.name));
  return fields.result(() => ({ email: email!, password: password!, name: name! }));
}

export interface RegistrationConfirmationInput {
  email: string;
  /** Exactly 6 digits: a malformed code never costs an attempt. */
  code: string;
  password: string;
}

export function validateRegistrationConfirmation(input: { email?: unknown; code?: unknown; password?: unknown }): Validated<RegistrationConfirmationInput> {
  const fields = new FieldCollector();
  const email = fields.take('email', checkEmail(input.email));
  const code = fields.take('code', checkOneTimeCode(input.code));
  const password = fields.take('password', checkLoginPassword(input.password));
  return fields.result(() => ({ email: email!, code: code!, password: password! }));
}

function checkOneTimeCode(raw: unknown): FieldCheck<string> {
  return isWellFormedOneTimeCode(raw) ? { ok: true, value: raw } : { ok: false, message: 'must be 6 digits' };
}

export interface LoginInput {
  email: string;
  password: string;
}

export function validateLogin(input: { email?: unknown; password?: unknown }): Validated<LoginInput> {
  const fields = new FieldCollector();
  const email = fields.take('email', checkEmail(input.email));
  const password = fields.take('password', checkLoginPassword(input.password));
  return fields.result(() => ({ email: email!, password: password! }));
}

export interface NewProjectInput {
  name: string;
  environment: ProjectEnvironment;
  /** Absent when no webhook is configured. */
  webhookUrl?: string;
  /** Decimal string 0–5; absent when not given (the project then tolerates 0). */
  paymentTolerancePercent?: string;
}

/** A new project; a missing, null or empty `webhookUrl` means no webhook. */
export function validateNewProject(input: {
  name?: unknown;
  environment?: unknown;
  webhookUrl?: unknown;
  paymentTolerancePercent?: unknown;
}): Validated<NewProjectInput> {
  const fields = new FieldCollector();
  const name = fields.take('name', checkName(input.name));
  const environment = fields.take('environment', checkEnvironment(input.environment));
  const webhookUrl = isUnset(input.webhookUrl) ? undefined : fields.take('webhookUrl', checkWebhookUrl(input.webhookUrl));
  const tolerance = isUnset(input.paymentTolerancePercent)
    ? undefined
    : fields.take('paymentTolerancePercent', checkPaymentTolerancePercent(input.paymentTolerancePercent));
  return fields.result(() => ({
    name: name!,
    environment: environment!,
    ...(webhookUrl === undefined ? {} : { webhookUrl }),
    ...(tolerance === undefined ? {} : { paymentTolerancePercent: tolerance }),
  }));
}

export interface ProjectUpdateInput {
  name?: string;
  /** `null` removes the webhook. */
  webhookUrl?: string | null;
  invoiceLifetimeMinutes?: number;
  paymentTolerancePercent?: string;
}

/**
 * A partial project update: absent fields stay unchanged; `webhookUrl` null or "" removes the
 * webhook (auth.proto UpdateProjectRequest). The environment is fixed at creation.
 */
export function validateProjectUpdate(input: {
  name?: unknown;
  webhookUrl?: unknown;
  invoiceLifetimeMinutes?: unknown;
  paymentTolerancePercent?: unknown;
}): Validated<ProjectUpdateInput> {
  const fields = new FieldCollector();
  const update: ProjectUpdateInput = {};
  if (input.name !== undefined) update.name = fields.take('name', checkName(input.name));
  if (input.webhookUrl === null || input.webhookUrl === '') update.webhookUrl = null;
  else if (input.webhookUrl !== undefined) update.webhookUrl = fields.take('webhookUrl', checkWebhookUrl(input.webhookUrl));
  if (input.invoiceLifetimeMinutes !== undefined) {
    update.invoiceLifetimeMinutes = fields.take('invoiceLifetimeMinutes', checkInvoiceLifetimeMinutes(input.invoiceLifetimeMinutes));
  }
  if (input.paymentTolerancePercent !== undefined) {
    update.paymentTolerancePercent = fields.take('paymentTolerancePercent', checkPaymentTolerancePercent(input.paymentTolerancePercent));
  }
  return fields.result(() => update);
}

export function validateApiKeyCreation(input: { name?: unknown }): Validated<{ name: string }> {
  const fields = new FieldCollector();
  const name = fields.take('name', checkName(input.name));
  return fields.result(() => ({ name: name! }));
}

// ---------------------------------------------------------------------------------------------

function refuse(message: string): { ok: false; message: string } {
  return { ok: false, message };
}

function isUnset(value: unknown): boolean {
  return value === undefined || value === null || value === '';
}

/** Gathers every field's violation so a request reports all its problems at once. */
class FieldCollector {
  private readonly violations: FieldViolation[] = [];

  /** The cleaned value, or undefined after recording the violation under `field`. */
  take<T>(field: string, check: FieldCheck<T>): T | undefined {
    if (check.ok) return check.value;
    this.violations.push({ field, message: check.message });
    return undefined;
  }

  /** `build` runs only when every field passed, so its non-null assertions hold. */
  result<T>(build: () => T): Validated<T> {
    return this.violations.length > 0 ? { ok: false, violations: [...this.violations] } : { ok: true, value: build() };
  }
}

export interface PasswordChangeInput {
  currentPassword: string;
  newPassword: string;
}

export function validatePasswordChange(input: { currentPassword?: unknown; newPassword?: unknown }): Validated<PasswordChangeInput> {
  const fields = new FieldCollector();
  const currentPassword = fields.take('currentPassword', checkLoginPassword(input.currentPassword));
  const newPassword = fields.take('newPassword', checkNewPassword(input.newPassword));
  return fields.result(() => ({ currentPassword: currentPassword!, newPassword: newPassword! }));
}
