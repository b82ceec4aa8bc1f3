import { createHmac } from 'node:crypto';
import { generateWebhookSecret, webhookSecretKey } from '../src/domain/webhook-secrets';

describe('Standard Webhooks secrets', () => {
  test('a secret is whsec_ + base64 of 32 random bytes by default', () => {
    const secret = generateWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(webhookSecretKey(secret)).toHaveLength(32);
    expect(generateWebhookSecret()).not.toBe(secret);
  });

  test('24 to 32 bytes are allowed, nothing else', () => {
    expect(generateWebhookSecret(24)).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(webhookSecretKey(generateWebhookSecret(24))).toHaveLength(24);
    for (const length of [0, 16, 23, 33, 64, 24.5]) {
      expect(() => generateWebhookSecret(length)).toThrow(RangeError);
    }
  });

  test('the HMAC key is the base64-decoded part, as standardwebhooks libraries use it', () => {
    // Secret of the Standard Webhooks specification's example.
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const signed = 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}';
    const signature = createHmac('sha256', webhookSecretKey(secret)).update(signed).digest('base64');
    expect(signature).toBe('g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  test('text that is not a whsec_ secret is refused', () => {
    for (const text of ['', 'whsec_', 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_short', 'whsec_MfKQ9r8GKYqrTwjU*D8ILPZIo2LaLaSw']) {
      expect(() => webhookSecretKey(text)).toThrow(/whsec_/);
    }
  });
});
