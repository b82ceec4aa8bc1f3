/** Configuration errors name the variable and never print a secret. */
import { ConfigError, loadConfig, redactUrlPassword, setting, type Setting } from '../src/config';

function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error('no ConfigError');
}

test('a URL with a password is shown with the password masked', () => {
  const message = errorOf(() => loadConfig({ DATABASE_URL: setting.url(['postgres:']) }, { DATABASE_URL: 'mysql://app:s3cr3t@db:3306/x' }));
  expect(message).toBe('config: DATABASE_URL="mysql://app:***@db:3306/x" is invalid: expected a URL starting with postgres://');
  expect(message).not.toContain('s3cr3t');
  expect(redactUrlPassword('smtp://mailer:pa:ss@smtp.example:587')).toBe('smtp://mailer:***@smtp.example:587');
  expect(redactUrlPassword('postgres://postgres@127.0.0.1/db')).toBe('postgres://postgres@127.0.0.1/db');
});

test('a setting marked never-shown names the variable without its value', () => {
  const secret: Setting<string> = { expected: 'an extended public key', shown: false, parse: (raw) => (raw.startsWith('xpub') ? raw : undefined) };
  const message = errorOf(() => loadConfig({ INVOICE_XPUB_BTC: secret }, { INVOICE_XPUB_BTC: 'xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi' }));
  expect(message).toBe('config: INVOICE_XPUB_BTC is invalid (value not shown): expected an extended public key');
});

test('missing required settings are named; production drops development defaults', () => {
  const settings = { NATS_URL: setting.url(['nats:'], { devDefault: 'nats://127.0.0.1:4222' }) };
  expect(loadConfig(settings, {}).NATS_URL).toBe('nats://127.0.0.1:4222');
  expect(errorOf(() => loadConfig(settings, { APP_ENV: 'production' }))).toBe('config: NATS_URL is required: expected a URL starting with nats://');
});
