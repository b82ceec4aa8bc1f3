/** Configuration errors name the variable and never print a secret. */
import { commonSettings, ConfigError, formatDurationMs, loadConfig, parseDurationMs, redactUrlPassword, setting, type Setting } from '../src/config';

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

test('a password with an unencoded "/" or "@", or a URL with a mistyped scheme, is masked too (an outside review saw them printed in full)', () => {
  for (const [raw, shown] of [
    ['postgres://u:S3CRET/PW@h/db', 'postgres://u:***@h/db'],
    ['nats://u:S3CRET/PW@h:4222', 'nats://u:***@h:4222'],
    ['postgres//u:S3CRETPW@h/x', 'postgres//u:***@h/x'],
    ['postgres://u:S3C@RET@h/db', 'postgres://u:***@h/db'],
    ['u:S3CRET@h', 'u:***@h'],
    ['u:pa//ss@h', 'u:***@h'],
    ['postgres:/u:pw//x@h', 'postgres:/u:***@h'],
  ]) {
    expect(redactUrlPassword(raw!)).toBe(shown);
  }
  // Refused as they are, and named without the password.
  for (const raw of ['postgres://u:S3CRET/PW@h/db', 'postgres//u:S3CRETPW@h/x']) {
    const message = errorOf(() => loadConfig({ DATABASE_URL: setting.url(['postgres:']) }, { DATABASE_URL: raw }));
    expect(message).toContain('DATABASE_URL="postgres');
    expect(message).not.toContain('S3C');
  }
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

test('JetStream stream settings: 1 replica and 30 days by default; bad values refused by name', () => {
  const streams = { NATS_STREAM_REPLICAS: commonSettings.NATS_STREAM_REPLICAS, NATS_STREAM_MAX_AGE: commonSettings.NATS_STREAM_MAX_AGE };
  expect(loadConfig(streams, {})).toEqual({ NATS_STREAM_REPLICAS: 1, NATS_STREAM_MAX_AGE: 30 * 86_400_000 });
  expect(loadConfig(streams, { NATS_STREAM_REPLICAS: '3', NATS_STREAM_MAX_AGE: '90d' })).toEqual({ NATS_STREAM_REPLICAS: 3, NATS_STREAM_MAX_AGE: 90 * 86_400_000 });
  expect(loadConfig(streams, { NATS_STREAM_MAX_AGE: '36h' }).NATS_STREAM_MAX_AGE).toBe(36 * 3_600_000);
  expect(errorOf(() => loadConfig(streams, { NATS_STREAM_REPLICAS: '0' }))).toBe(
    'config: NATS_STREAM_REPLICAS="0" is invalid: expected a whole number from 1 to 5',
  );
  for (const bad of ['7', '7 days', '-1d', '30m', '3651d', '1.5d']) {
    expect(errorOf(() => loadConfig(streams, { NATS_STREAM_MAX_AGE: bad }))).toBe(
      `config: NATS_STREAM_MAX_AGE=${JSON.stringify(bad)} is invalid: expected a duration like 30d, 12h, 90m or 45s (number + ms|s|m|h|d), from 1h to 3650d`,
    );
  }
});

test('durations parse and print in whole units', () => {
  expect(parseDurationMs('500ms')).toBe(500);
  expect(parseDurationMs('45s')).toBe(45_000);
  expect(parseDurationMs('30d')).toBe(2_592_000_000);
  expect(parseDurationMs('30')).toBeUndefined();
  // Where a setting documents bare numbers as milliseconds (the invoice service's durations).
  expect(parseDurationMs('1500', { bareMilliseconds: true })).toBe(1_500);
  expect(parseDurationMs('2m', { bareMilliseconds: true })).toBe(120_000);
  expect(parseDurationMs('2 m', { bareMilliseconds: true })).toBeUndefined();
  expect(parseDurationMs('d')).toBeUndefined();
  expect(formatDurationMs(2_592_000_000)).toBe('30d');
  expect(formatDurationMs(90_000)).toBe('90s');
  expect(formatDurationMs(1_500)).toBe('1500ms');
});

test('NATS_URL takes one server or a comma-separated list of a cluster', () => {
  const settings = { NATS_URL: commonSettings.NATS_URL };
  expect(loadConfig(settings, { NATS_URL: 'nats://a:4222, nats://b:4222,tls://c:4222' }).NATS_URL).toBe('nats://a:4222,nats://b:4222,tls://c:4222');
  expect(errorOf(() => loadConfig(settings, { NATS_URL: 'nats://a:4222,http://b' }))).toBe(
    'config: NATS_URL="nats://a:4222,http://b" is invalid: expected a URL starting with nats:// or tls://, or a comma-separated list of them',
  );
});
