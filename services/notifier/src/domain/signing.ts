/**
 * Standard Webhooks signing (standardwebhooks.com), as docs/architecture.md#webhook-signing requires: a receiver verifies
 * our deliveries with the `standardwebhooks` package in any language, sandbox and live alike, and
 * we sign with that same reference package rather than our own HMAC code.
 *
 *   webhook-id:        the event id (the same on every retry, so receivers can deduplicate)
 *   webhook-timestamp: unix seconds of this attempt
 *   webhook-signature: "v1," + base64(HMAC-SHA256(secret bytes, `${id}.${timestamp}.${body}`)), one per
 *                      signing secret, space-separated: after a rotation the replaced secrets sign
 *                      too until their overlap ends (docs/webhook-delivery.md#secret-rotation), and
 *                      a receiver accepts a delivery any one of them verifies
 *   webhook-event-type: the event type (e.g. invoice.paid), docs/architecture.md#webhook-event-type: bodies of different
 *                      events arrive at the same URL, so the receiver dispatches on this header
 *
 * The secret is "whsec_" + base64 of its raw bytes; the HMAC key is the decoded bytes, not the text.
 */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

export class InvalidWebhookSecretError extends Error {
  constructor(reason: string) {
    // Never echo the secret itself: this message may reach a log.
    super(`invalid webhook secret: ${reason} (expected "${WEBHOOK_SECRET_PREFIX}<base64>")`);
    this.name = 'InvalidWebhookSecretError';
  }
}

// A type, not an interface, so it is assignable to plain header records (index signature).
export type WebhookSignatureHeaders = {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
};

/** Every header of a delivery that says what it is and proves who sent it. */
export type WebhookDeliveryHeaders = WebhookSignatureHeaders & { 'webhook-event-type': string };

const EVENT_TYPE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;

/** A new random project secret: 32 bytes (the spec asks for 24 to 64). */
export function generateWebhookSecret(): string {
  return WEBHOOK_SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** The HMAC key of a "whsec_<base64>" secret. */
export function decodeWebhookSecret(secret: string): Buffer {
  if (!secret.startsWith(WEBHOOK_SECRET_PREFIX)) throw new InvalidWebhookSecretError(`missing "${WEBHOOK_SECRET_PREFIX}" prefix`);
  const encoded = secret.slice(WEBHOOK_SECRET_PREFIX.length);
  // Buffer.from(…, 'base64') silently skips garbage, so check the alphabet first.
  if (encoded.length % 4 !== 0 || !BASE64.test(encoded)) throw new InvalidWebhookSecretError('not base64');
  return Buffer.from(encoded, 'base64');
}

/** Unix seconds, as the webhook-timestamp header carries them. */
export function unixSeconds(at: Date): number {
  return Math.floor(at.getTime() / 1000);
}

/** The secrets a project's deliveries are signed with at `now`: the current one first. */
export type SigningSecrets = readonly [string, ...string[]];

/**
 * The secrets that sign a project's attempt at `now`: the current one first, then those rotations
 * replaced, each until its expiry (docs/webhook-delivery.md#secret-rotation).
 */
export function signingSecrets(
  project: { webhookSecret: string; previousWebhookSecrets: ReadonlyArray<{ secret: string; expiresAt: Date }> },
  now: Date,
): SigningSecrets {
  const previous = project.previousWebhookSecrets.filter((p) => p.expiresAt > now).map((p) => p.secret);
  return [project.webhookSecret, ...new Set(previous.filter((secret) => secret !== project.webhookSecret))];
}

/**
 * The three headers for one delivery attempt. `body` must be the exact bytes sent (and stored):
 * the receiver verifies the raw body it got, so re-serialising would break the signature.
 */
export function signWebhook(params: { id: string; timestamp: Date; body: string; secrets: SigningSecrets }): WebhookSignatureHeaders {
  if (params.id === '' || /\s/.test(params.id)) throw new Error('webhook id must be non-empty without whitespace');
  // The key checked here (prefix, clean base64) and handed over as bytes: the package would read a
  // secret without the prefix, or with stray characters, as some other key.
  const signatures = params.secrets.map((secret) => new Webhook(decodeWebhookSecret(secret), { format: 'raw' }).sign(params.id, params.timestamp, params.body));
  return {
    'webhook-id': params.id,
    'webhook-timestamp': String(unixSeconds(params.timestamp)),
    // Standard Webhooks: several signatures are space-delimited.
    'webhook-signature': signatures.join(' '),
  };
}

export const WEBHOOK_USER_AGENT = 'coinvoice-webhooks/1';

/**
 * Every header of one delivery attempt: the JSON body's, the signature headers, and
 * `webhook-event-type` derived from the event type of the delivery (not signed: Standard Webhooks
 * signs id, timestamp and body). Used by the delivery worker and by ListProjectEvents (what
 * `coinvoice listen` forwards), so a forwarded event is signed exactly like a delivery.
 */
export function webhookDeliveryHeaders(params: {
  id: string;
  eventType: string;
  timestamp: Date;
  body: string;
  secrets: SigningSecrets;
}): WebhookDeliveryHeaders & { 'content-type': string; 'content-length': string; 'user-agent': string } {
  if (!EVENT_TYPE.test(params.eventType)) throw new Error(`webhook event type must look like invoice.paid, got "${params.eventType}"`);
  return {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(params.body)),
    'user-agent': WEBHOOK_USER_AGENT,
    ...signWebhook(params),
    'webhook-event-type': params.eventType,
  };
}
