/**
 * Our signatures are Standard Webhooks signatures: the reference `standardwebhooks` package
 * accepts them, and rejects a tampered body or an old timestamp.
 */
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { decodeWebhookSecret, generateWebhookSecret, InvalidWebhookSecretError, signingSecrets, signWebhook } from '../src/domain/signing';

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const body = '{"invoiceId":"inv_1","orderId":null,"status":"Paid","amount":0.00000001,"currency":"BTC","environment":"sandbox"}';
const eventId = 'evt_2b7f0d5e-7a7e-4a62-9d3c-2f4f2c1b9a10';

describe('the standardwebhooks package', () => {
  test('verifies what we sign and returns the body', () => {
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body, secrets: [secret] });
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(JSON.parse(body));
  });

  test('computes the same signature as we do', () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    const ours = signWebhook({ id: eventId, timestamp: at, body, secrets: [secret] });
    expect(ours['webhook-timestamp']).toBe('1767323045');
    expect(ours['webhook-signature']).toBe(new Webhook(secret).sign(eventId, at, body));
  });

  test('verifies a freshly generated secret and a non-ASCII body (signed as UTF-8)', () => {
    const fresh = generateWebhookSecret();
    const unicode = '{"orderId":"café ☕ 注文"}';
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body: unicode, secrets: [fresh] });
    expect(new Webhook(fresh).verify(unicode, { ...headers })).toEqual({ orderId: 'café ☕ 注文' });
  });

  test('rejects a tampered body', () => {
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body, secrets: [secret] });
    const tampered = body.replace('0.00000001', '1000');
    expect(() => new Webhook(secret).verify(tampered, { ...headers })).toThrow(/No matching signature/);
  });

  test('rejects another id under the same signature', () => {
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body, secrets: [secret] });
    expect(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'evt_other' })).toThrow();
  });

  test('rejects an old timestamp and one too far ahead', () => {
    const old = signWebhook({ id: eventId, timestamp: new Date(Date.now() - 6 * 60_000), body, secrets: [secret] });
    expect(() => new Webhook(secret).verify(body, { ...old })).toThrow(/too old/);
    const ahead = signWebhook({ id: eventId, timestamp: new Date(Date.now() + 6 * 60_000), body, secrets: [secret] });
    expect(() => new Webhook(secret).verify(body, { ...ahead })).toThrow(/too new/);
  });

  test('rejects a signature made with another secret', () => {
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body, secrets: [generateWebhookSecret()] });
    expect(() => new Webhook(secret).verify(body, { ...headers })).toThrow();
  });
});

describe('the signature, by the specification', () => {
  test('is v1, base64 HMAC-SHA256 keyed with the decoded secret bytes (not the text) over "id.timestamp.body"', () => {
    const at = new Date('2026-03-01T12:00:00.999Z');
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const expected = createHmac('sha256', key).update(`${eventId}.1772366400.${body}`).digest('base64');
    expect(signWebhook({ id: eventId, timestamp: at, body, secrets: [secret] })).toEqual({
      'webhook-id': eventId,
      'webhook-timestamp': '1772366400',
      'webhook-signature': `v1,${expected}`,
    });
  });
});

describe('after a rotation (docs/webhook-delivery.md#secret-rotation)', () => {
  const previous = 'whsec_dGhlIHByZXZpb3VzIHNlY3JldCwgMzIgYnl0ZXMgbG9uZy4=';
  const at = new Date('2026-03-01T12:00:00Z');

  test('a delivery carries one signature per secret: the receiver verifies it with either', () => {
    const headers = signWebhook({ id: eventId, timestamp: new Date(), body, secrets: [secret, previous] });
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=* v1,[A-Za-z0-9+/]+=*$/);
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(JSON.parse(body));
    expect(new Webhook(previous).verify(body, { ...headers })).toEqual(JSON.parse(body));
    expect(() => new Webhook(generateWebhookSecret()).verify(body, { ...headers })).toThrow(/No matching signature/);
  });

  test('each signature is the one that secret alone makes, the current one first', () => {
    const both = signWebhook({ id: eventId, timestamp: at, body, secrets: [secret, previous] });
    const current = signWebhook({ id: eventId, timestamp: at, body, secrets: [secret] });
    const old = signWebhook({ id: eventId, timestamp: at, body, secrets: [previous] });
    expect(both['webhook-signature']).toBe(`${current['webhook-signature']} ${old['webhook-signature']}`);
  });

  test('each replaced secret signs until its own expiry, not a millisecond later; the current one always, first', () => {
    const older = 'whsec_b2xkZXIgc2VjcmV0LCByZXBsYWNlZCBiZWZvcmUgdGhhdA==';
    const project = {
      webhookSecret: secret,
      previousWebhookSecrets: [
        { secret: older, expiresAt: new Date(at.getTime() + 120_000) },
        { secret: previous, expiresAt: new Date(at.getTime() + 60_000) },
      ],
    };
    expect(signingSecrets(project, at)).toEqual([secret, older, previous]);
    expect(signingSecrets(project, new Date(at.getTime() + 59_999))).toEqual([secret, older, previous]);
    expect(signingSecrets(project, new Date(at.getTime() + 60_000))).toEqual([secret, older]);
    expect(signingSecrets(project, new Date(at.getTime() + 120_000))).toEqual([secret]);
    expect(signingSecrets({ webhookSecret: secret, previousWebhookSecrets: [] }, at)).toEqual([secret]);
    // A secret listed twice signs once.
    expect(signingSecrets({ webhookSecret: secret, previousWebhookSecrets: [{ secret, expiresAt: new Date(at.getTime() + 1) }] }, at)).toEqual([secret]);
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
    expect(() => signWebhook({ id: eventId, timestamp: new Date(), body, secrets: [bad] })).toThrow(/invalid webhook secret/);
    try {
      decodeWebhookSecret(bad);
    } catch (error) {
      if (bad.length > 6) expect((error as Error).message).not.toContain(bad.slice(6));
    }
  });

  test('refuses an empty or whitespace webhook id', () => {
    expect(() => signWebhook({ id: '', timestamp: new Date(), body, secrets: [secret] })).toThrow(/webhook id/);
    expect(() => signWebhook({ id: 'a b', timestamp: new Date(), body, secrets: [secret] })).toThrow(/webhook id/);
  });
});
