/**
 * A missing or malformed required setting stops a real process with one readable line naming the
 * variable and what it expects — before it touches Postgres or NATS.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { testEventKeys } from '../support/event-keys';
import { REPO_ROOT } from '../support/system';
import { bareProcessEnv } from '../support/process-env';

function run(entry: string, env: NodeJS.ProcessEnv) {
  const clean: NodeJS.ProcessEnv = bareProcessEnv(env);
  const result = spawnSync(process.execPath, [path.join(REPO_ROOT, entry)], { env: clean, encoding: 'utf8', timeout: 20_000 });
  return { status: result.status, stderrLines: result.stderr.trim().split('\n').filter(Boolean), stdout: result.stdout };
}

const entries = [
  'services/auth/dist/main.js',
  'services/invoice/dist/main.js',
  'services/payout/dist/main.js',
  'services/notifier/dist/main.js',
];

test.each(entries)('%s refuses a malformed DATABASE_URL with one line', (entry) => {
  const { status, stderrLines } = run(entry, { DATABASE_URL: 'mysql://nope' });
  expect(status).toBe(1);
  expect(stderrLines).toEqual([
    'config: DATABASE_URL="mysql://nope" is invalid: expected a URL starting with postgres:// or postgresql://',
  ]);
});

test.each(entries)('%s refuses a port that is not a number', (entry) => {
  const { status, stderrLines } = run(entry, { GRPC_PORT: 'eighty' });
  expect(status).toBe(1);
  expect(stderrLines).toEqual(['config: GRPC_PORT="eighty" is invalid: expected a TCP port number from 0 to 65535']);
});

test('the gateway refuses a malformed backend URL with one line', () => {
  const { status, stderrLines } = run('gateway/dist/main.js', { AUTH_URL: 'localhost:50051' });
  expect(status).toBe(1);
  expect(stderrLines).toEqual(['config: AUTH_URL="localhost:50051" is invalid: expected a URL starting with http:// or https://']);
});

test('the gateway refuses an out-of-range port', () => {
  const { status, stderrLines } = run('gateway/dist/main.js', { GATEWAY_PORT: '99999' });
  expect(status).toBe(1);
  expect(stderrLines).toEqual(['config: GATEWAY_PORT="99999" is invalid: expected a TCP port number from 0 to 65535']);
});

test.each(entries)('%s in production names a missing DATABASE_URL instead of guessing localhost', (entry) => {
  const { status, stderrLines } = run(entry, { APP_ENV: 'production' });
  expect(status).toBe(1);
  expect(stderrLines).toEqual(['config: DATABASE_URL is required: expected a URL starting with postgres:// or postgresql://']);
});

test('the gateway in production names a missing backend URL', () => {
  const { status, stderrLines } = run('gateway/dist/main.js', { APP_ENV: 'production' });
  expect(status).toBe(1);
  expect(stderrLines).toEqual(['config: AUTH_URL is required: expected a URL starting with http:// or https://']);
});

test('the gateway in production refuses GATEWAY_TRUST_PROXY=true or a range holding the internet (any client could choose its IP); the ingress addresses are taken', () => {
  const production = {
    APP_ENV: 'production',
    AUTH_URL: 'https://auth:50051',
    INVOICE_URL: 'https://invoice:50052',
    PAYOUT_URL: 'https://payout:50053',
    NOTIFIER_URL: 'https://notifier:50054',
    NATS_URL: 'nats://127.0.0.1:1',
    TLS_CA_FILE: '/nonexistent/ca.pem',
    TLS_CERT_FILE: '/nonexistent/cert.pem',
    TLS_KEY_FILE: '/nonexistent/key.pem',
  };
  const { status, stderrLines } = run('gateway/dist/main.js', { ...production, GATEWAY_TRUST_PROXY: 'true' });
  expect(status).toBe(1);
  expect(stderrLines).toEqual([
    'config: GATEWAY_TRUST_PROXY="true" is invalid: expected false or the ingress addresses/CIDRs in production (true lets any client choose its IP with X-Forwarded-For)',
  ]);
  // Named ingress addresses pass this check (the process then fails later, on the missing TLS files).
  expect(run('gateway/dist/main.js', { ...production, GATEWAY_TRUST_PROXY: '10.0.0.0/8' }).stderrLines.join('\n')).not.toContain('GATEWAY_TRUST_PROXY');
  // A range that holds the internet trusts everyone as much as `true` does (an outside review
  // started production with 0.0.0.0/1,128.0.0.0/1): public ranges wider than a /16 (IPv6 /48) are
  // refused, naming the entry; private networks, a load balancer's /24 or single addresses are not.
  for (const [value, wide] of [
    ['0.0.0.0/1,128.0.0.0/1', '0.0.0.0/1'],
    ['10.1.2.3,2001:db8::/32', '2001:db8::/32'],
    ['192.168.0.0/15', '192.168.0.0/15'],
    // IPv4-mapped IPv6: ::ffff:0:0/96 is all of IPv4 (a second review's bypass).
    ['::ffff:10.0.0.0/104,::ffff:0:0/96', '::ffff:0:0/96'],
  ]) {
    const refused = run('gateway/dist/main.js', { ...production, GATEWAY_TRUST_PROXY: value });
    expect(refused.status).toBe(1);
    expect(refused.stderrLines).toEqual([
      `config: GATEWAY_TRUST_PROXY="${wide}" is invalid: expected the ingress addresses/CIDRs in production: ${wide} is public and wider than a /16 (IPv6 /48), so clients inside it could choose their IP with X-Forwarded-For`,
    ]);
  }
  const ingresses = '172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,203.0.113.0/24,198.51.100.7,fd00::/8,2001:db8:1::/48,::1,::ffff:10.0.0.0/104';
  expect(run('gateway/dist/main.js', { ...production, GATEWAY_TRUST_PROXY: ingresses }).stderrLines.join('\n')).not.toContain('GATEWAY_TRUST_PROXY');
  // Not an address or CIDR at all: refused in any environment.
  for (const value of ['10.0.0.0/33', 'fe80::/129']) {
    expect(run('gateway/dist/main.js', { GATEWAY_TRUST_PROXY: value }).stderrLines[0]).toMatch(/^config: GATEWAY_TRUST_PROXY=".*" is invalid: expected false, true, or comma-separated proxy addresses\/CIDRs$/);
  }
});

test.each(entries)('%s refuses a stream replica count or max age it cannot use', (entry) => {
  expect(run(entry, { NATS_STREAM_REPLICAS: 'three' }).stderrLines).toEqual([
    'config: NATS_STREAM_REPLICAS="three" is invalid: expected a whole number from 1 to 5',
  ]);
  const { status, stderrLines } = run(entry, { NATS_STREAM_MAX_AGE: '7' });
  expect(status).toBe(1);
  expect(stderrLines).toEqual([
    'config: NATS_STREAM_MAX_AGE="7" is invalid: expected a duration like 30d, 12h, 90m or 45s (number + ms|s|m|h|d), from 1h to 3650d',
  ]);
});

test.each(entries)('%s refuses to forget processed events before its stream does (PROCESSED_EVENTS_RETENTION_DAYS ≤ NATS_STREAM_MAX_AGE — an outside review)', (entry) => {
  const { status, stderrLines } = run(entry, { PROCESSED_EVENTS_RETENTION_DAYS: '1', NATS_STREAM_MAX_AGE: '30d', EVENT_VERIFY_KEYS: testEventKeys().verifyKeys, EVENT_SIGNING_KEY_FILE: testEventKeys().file('auth') });
  expect(status).toBe(1);
  expect(stderrLines).toEqual([
    'config: PROCESSED_EVENTS_RETENTION_DAYS="1" is invalid: expected more days than NATS_STREAM_MAX_AGE keeps events (30 d): a consumer must remember every event its stream can still deliver',
  ]);
});

describe('event keys (docs/events.md)', () => {
  test.each(entries)('%s without EVENT_SIGNING_KEY_FILE stops with one line naming it', (entry) => {
    const { status, stderrLines } = run(entry, { EVENT_VERIFY_KEYS: testEventKeys().verifyKeys });
    expect(status).toBe(1);
    expect(stderrLines).toHaveLength(1);
    expect(stderrLines[0]).toMatch(/^config: EVENT_SIGNING_KEY_FILE is required: expected the path of this service's Ed25519 private key/);
  });

  test.each(entries)('%s refuses a key file that is not an Ed25519 private key', (entry) => {
    const { status, stderrLines } = run(entry, { EVENT_SIGNING_KEY_FILE: path.join(REPO_ROOT, 'package.json'), EVENT_VERIFY_KEYS: testEventKeys().verifyKeys });
    expect(status).toBe(1);
    expect(stderrLines).toHaveLength(1);
    expect(stderrLines[0]).toContain(`config: EVENT_SIGNING_KEY_FILE="${path.join(REPO_ROOT, 'package.json')}" is invalid`);
  });

  test.each([
    ['services/payout/dist/main.js', 'payout', 'invoice'],
    ['services/notifier/dist/main.js', 'notifier', 'invoice, payout, and auth'],
  ] as const)('%s will not start without the public keys of the services whose events it consumes', (entry, service, producers) => {
    const { status, stderrLines } = run(entry, { EVENT_SIGNING_KEY_FILE: testEventKeys().file(service) });
    expect(status).toBe(1);
    expect(stderrLines).toHaveLength(1);
    expect(stderrLines[0]).toMatch(new RegExp(`^config: EVENT_VERIFY_KEYS is required: .* with a key of ${producers} \\(${service} consumes its events\\)$`));
  });

  test('the gateway will not start without the auth service\'s public key (it applies only signed revocations)', () => {
    const { status, stderrLines } = run('gateway/dist/main.js', { EVENT_VERIFY_KEYS: `invoice=${testEventKeys().signer('invoice').publicKey}` });
    expect(status).toBe(1);
    expect(stderrLines.join('\n')).toContain('EVENT_VERIFY_KEYS has no key of auth');
  });

  test.each(entries)('%s refuses a malformed EVENT_VERIFY_KEYS', (entry) => {
    const { status, stderrLines } = run(entry, { EVENT_VERIFY_KEYS: 'invoice=not-a-key' });
    expect(status).toBe(1);
    expect(stderrLines[0]).toMatch(/^config: EVENT_VERIFY_KEYS="invoice=not-a-key" is invalid: expected comma-separated <producer>=<Ed25519 public key/);
  });
});

test.each([...entries, 'gateway/dist/main.js'])('%s refuses a BIND_HOST that is not an IP address', (entry) => {
  const { status, stderrLines } = run(entry, { BIND_HOST: 'everywhere' });
  expect(status).toBe(1);
  expect(stderrLines[0]).toMatch(/^config: BIND_HOST="everywhere" is invalid: expected an IP address to listen on/);
});

test.each(['grant-operator', 'revoke-operator', 'rotate-kek'])('auth %s names a missing setting in one line, not a stack trace (an outside review)', (command) => {
  const result = spawnSync(process.execPath, [path.join(REPO_ROOT, 'services/auth/dist/main.js'), command, 'ops@example.com'], {
    env: bareProcessEnv({ APP_ENV: 'production' }),
    encoding: 'utf8',
    timeout: 20_000,
  });
  expect(result.status).toBe(1);
  expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^config: (DATABASE_URL|SECRETS_KEK) is required: expected /)]);
});
