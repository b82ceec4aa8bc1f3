/**
 * Standard Webhooks signing secrets (standardwebhooks.com): `whsec_` + base64 of random bytes.
 * The receiver's `standardwebhooks` library strips the prefix and base64-decodes the rest into the
 * HMAC-SHA256 key, so the notifier must sign with `webhookSecretKey(secret)`, not the text.
 */
import { randomBytes } from 'node:crypto';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
export const WEBHOOK_SECRET_MIN_BYTES = 24;
export const WEBHOOK_SECRET_MAX_BYTES = 32;
/** 32 bytes: a full 256-bit HMAC-SHA256 key. */
export const WEBHOOK_SECRET_DEFAULT_BYTES = 32;

/**
 * After a rotation the replaced secret signs next to the new one (docs/webhook-delivery.md#secret-rotation):
 * a day unless the merchant says otherwise, never longer; 0 stops it at once.
 */
export const PREVIOUS_WEBHOOK_SECRET_DEFAULT_MINUTES = 1440;
export const PREVIOUS_WEBHOOK_SECRET_MAX_MINUTES = 1440;

export function generateWebhookSecret(byteLength: number = WEBHOOK_SECRET_DEFAULT_BYTES): string {
  if (!Number.isInteger(byteLength) || byteLength < WEBHOOK_SECRET_MIN_BYTES || byteLength > WEBHOOK_SECRET_MAX_BYTES) {
    throw new RangeError(`webhook secrets are ${WEBHOOK_SECRET_MIN_BYTES}–${WEBHOOK_SECRET_MAX_BYTES} random bytes`);
  }
  return WEBHOOK_SECRET_PREFIX + randomBytes(byteLength).toString('base64');
}

/** The HMAC key bytes of a `whsec_` secret; throws if the text is not one. */
export function webhookSecretKey(secret: string): Buffer {
  const encoded = secret.startsWith(WEBHOOK_SECRET_PREFIX) ? secret.slice(WEBHOOK_SECRET_PREFIX.length) : '';
  const key = Buffer.from(encoded, 'base64');
  // Buffer.from skips invalid characters; a canonical re-encoding proves the text was clean base64.
  if (key.length < WEBHOOK_SECRET_MIN_BYTES || key.toString('base64') !== encoded) {
    throw new Error('not a whsec_ webhook secret');
  }
  return key;
}
