/**
 * Our signatures are Standard Webhooks signatures: the reference `standardwebhooks` package
 * accepts them, and rejects a tampered body or an old timestamp. Our own verifier agrees.
 */
import { Webhook } from 'standardwebhooks';
import {
  computeWebhookSignature,
  decodeWebhookSecret,
  generateWebhookSecret,
  InvalidWebhookSecretError,
  signWebhook,
  verifyWebhook,
} from '../src/domain/signing';

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const body = '{"invoiceId":"inv_1","orderId":null,"status":"Paid","amount":0.00000001,"currency":"BTC","environment":"sandbox"}';
const eventId = 'evt_2b7f0d5e-7a7e-4a62-9d3c-2f4f2c1b9a10';

describe('the standardwebhooks package', () => {
  test('verifies what we sign and returns the body', () => {
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body, secret });
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(JSON.parse(body));
  });

  test('computes the same signature as we do', () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    const ours = signWebhook({ id: eventId, timestamp: at, body, secret });
    expect(ours['webhook-timestamp']).toBe('1767323045');
    expect(ours['webhook-signature']).toBe(new Webhook(secret).sign(eventId, at, body));
  });

  test('verifies a freshly generated secret and a non-ASCII body (signed as UTF-8)', () => {
    const fresh = generateWebhookSecret();
    const unicode = '{"orderId":"café ☕ 注文"}';
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body: unicode, secret: fresh });
    expect(new Webhook(fresh).verify(unicode, { ...headers })).toEqual({ orderId: 'café ☕ 注文' });
  });

  test('rejects a tampered body', () => {
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body, secret });
    const tampered = body.replace('0.00000001', '1000');
    expect(() => new Webhook(secret).verify(tampered, { ...headers })).toThrow(/No matching signature/);
  });

  test('rejects another id under the same signature', () => {
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body, secret });
    expect(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'evt_other' })).toThrow();
  });

  test('rejects an old timestamp and one too far ahead', () => {
    const old = signWebhook({ id: eventId, timestamp: new Date(Date.now() - 6 * 60_000), body, secret });
    expect(() => new Webhook(secret).verify(body, { ...old })).toThrow(/too old/);
    const ahead = signWebhook({ id: eventId, timestamp: new Date(Date.now() + 6 * 60_000), body, secret });
    expect(() => new Webhook(secret).verify(body, { ...ahead })).toThrow(/too new/);
  });

  test('rejects a signature made with another secret', () => {
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body, secret: generateWebhookSecret() });
    expect(() => new Webhook(secret).verify(body, { ...headers })).toThrow();
  });
});

describe('verifyWebhook', () => {
  const now = new Date('2026-03-01T12:00:00Z');
  const signed = signWebhook({ id: eventId, timestamp: now, body, secret });

  test('accepts our own signature, with headers in any case or as a Headers object', () => {
    expect(verifyWebhook({ headers: signed, body, secret, now })).toEqual({ ok: true, id: eventId, timestamp: 1772366400 });
    const shouting = Object.fromEntries(Object.entries(signed).map(([k, v]) => [k.toUpperCase(), v]));
    expect(verifyWebhook({ headers: shouting, body, secret, now }).ok).toBe(true);
    expect(verifyWebhook({ headers: new Headers({ ...signed }), body: Buffer.from(body), secret, now }).ok).toBe(true);
  });

  test('accepts a signature made by the standardwebhooks package', () => {
    const theirs = new Webhook(secret).sign(eventId, now, body);
    expect(verifyWebhook({ headers: { ...signed, 'webhook-signature': theirs }, body, secret, now }).ok).toBe(true);
  });

  test('accepts any matching entry of a space-separated list, skipping other versions', () => {
    const good = signed['webhook-signature'];
    const other = computeWebhookSignature(generateWebhookSecret(), eventId, 1772366400, body);
    for (const list of [`${other} ${good}`, `v1a,${good.slice(3)} ${good}`, `garbage ${good}`, `${good} ${other}`]) {
      expect(verifyWebhook({ headers: { ...signed, 'webhook-signature': list }, body, secret, now }).ok).toBe(true);
    }
  });

  test.each([
    ['a tampered body', { body: `${body} ` }, 'no_matching_signature'],
    ['a signature of another version only', { signature: `v2,${signed['webhook-signature'].slice(3)}` }, 'no_matching_signature'],
    ['a truncated signature', { signature: signed['webhook-signature'].slice(0, 20) }, 'no_matching_signature'],
    ['a timestamp 5 min 1 s old', { now: new Date(now.getTime() + 301_000) }, 'timestamp_too_old'],
    ['a timestamp 5 min 1 s ahead', { now: new Date(now.getTime() - 301_000) }, 'timestamp_too_new'],
    ['a non-numeric timestamp', { timestamp: '17e8' }, 'invalid_timestamp'],
    ['no signature header', { signature: '' }, 'missing_headers'],
  ])('rejects %s', (_name, change: { body?: string; signature?: string; now?: Date; timestamp?: string }, reason) => {
    const headers = {
      ...signed,
      ...(change.signature === undefined ? {} : { 'webhook-signature': change.signature }),
      ...(change.timestamp === undefined ? {} : { 'webhook-timestamp': change.timestamp }),
    };
    expect(verifyWebhook({ headers, body: change.body ?? body, secret, now: change.now ?? now })).toEqual({ ok: false, reason });
  });

  test('accepts a timestamp exactly 5 minutes off', () => {
    expect(verifyWebhook({ headers: signed, body, secret, now: new Date(now.getTime() + 300_000) }).ok).toBe(true);
    expect(verifyWebhook({ headers: signed, body, secret, now: new Date(now.getTime() - 300_000) }).ok).toBe(true);
  });
});

describe('secrets', () => {
  test('a generated secret is whsec_ and 32 random bytes', () => {
    const a = generateWebhookSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(decodeWebhookSecret(a)).toHaveLength(32);
    expect(generateWebhookSecret()).not.toBe(a);
  });

  test.each([
    ['no prefix', 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
    ['not base64', 'whsec_not*base64!'],
    ['bad padding', 'whsec_abc'],
    ['empty', 'whsec_'],
  ])('refuses a secret with %s, without echoing it', (_name, bad) => {
    expect(() => decodeWebhookSecret(bad)).toThrow(InvalidWebhookSecretError);
    expect(() => signWebhook({ id: eventId, timestamp: new Date(), body, secret: bad })).toThrow(/invalid webhook secret/);
    try {
      decodeWebhookSecret(bad);
    } catch (error) {
      if (bad.length > 6) expect((error as Error).message).not.toContain(bad.slice(6));
    }
  });

  test('refuses an empty or whitespace webhook id', () => {
    expect(() => signWebhook({ id: '', timestamp: new Date(), body, secret })).toThrow(/webhook id/);
    expect(() => signWebhook({ id: 'a b', timestamp: new Date(), body, secret })).toThrow(/webhook id/);
  });
});
