/**
 * Rate limits (runtime rate-limit.ts): the setting's syntax, fixed windows in memory, and the
 * Postgres counter shared by several pools (replicas) under concurrency, with the RateLimitExceeded
 * detail a refusal carries to the gateway.
 */
import { clientAddressKey, createDb, enforceRateLimit, errorFacts, MemoryRateLimitStore, PostgresRateLimitStore, RATE_LIMIT_COUNTERS_DDL, rateLimitSetting, type Sql } from '../src';
import { createTestDatabase, type TestDatabase } from '../../../test/support/infra';

test('"<count>/<window>" settings', () => {
  const parse = (raw: string) => rateLimitSetting('p', '1/1s').parse(raw);
  expect(parse('10/15m')).toEqual({ name: 'p', limit: 10, windowSeconds: 900 });
  expect(parse(' 5 / 1h ')).toEqual({ name: 'p', limit: 5, windowSeconds: 3600 });
  for (const bad of ['', '10', '0/1m', '10/0m', '10/1w', '-1/1m', '1.5/1m', '10/8d']) expect(parse(bad)).toBeUndefined();
});

test('memory: the limit per window and key, then the next window', async () => {
  let now = 1_000_000;
  const store = new MemoryRateLimitStore(100, () => now);
  const policy = { name: 'p', limit: 3, windowSeconds: 10 };
  const outcomes = [];
  for (let i = 0; i < 4; i++) outcomes.push(await store.consume(policy, 'a'));
  expect(outcomes.map((o) => o.allowed)).toEqual([true, true, true, false]);
  expect(outcomes[3]).toEqual({ allowed: false, retryAfterSeconds: 10 });
  expect((await store.consume(policy, 'b')).allowed).toBe(true);
  now += 10_000;
  expect((await store.consume(policy, 'a')).allowed).toBe(true);
});

test('memory: a refund takes back one call of the current window, never below zero, nothing once the window has ended', async () => {
  let now = 2_000_000;
  const store = new MemoryRateLimitStore(100, () => now);
  const policy = { name: 'p', limit: 2, windowSeconds: 10 };
  await store.consume(policy, 'a');
  await store.consume(policy, 'a');
  await store.refund(policy, 'a');
  expect(await store.consume(policy, 'a')).toMatchObject({ allowed: true, remaining: 0 });
  await store.refund(policy, 'b');
  expect(await store.consume(policy, 'b')).toMatchObject({ allowed: true, remaining: 1 });
  now += 10_000;
  await store.refund(policy, 'a');
  expect(await store.consume(policy, 'a')).toMatchObject({ allowed: true, remaining: 1 });
});

describe('postgres', () => {
  let database: TestDatabase;
  let pools: Sql[];
  beforeAll(async () => {
    database = await createTestDatabase('cvrate');
    pools = [createDb({ url: database.url, schema: 'public', max: 4 }), createDb({ url: database.url, schema: 'public', max: 4 })];
    await pools[0]!.unsafe(RATE_LIMIT_COUNTERS_DDL);
  });
  afterAll(async () => {
    for (const pool of pools ?? []) await pool.end({ timeout: 5 });
    await database?.drop().catch(() => undefined);
  });

  test('two pools (replicas) share one count: exactly `limit` of 40 concurrent calls pass; the refusal says when to return', async () => {
    const policy = { name: 'login-account', limit: 10, windowSeconds: 900 };
    const stores = pools.map((p) => new PostgresRateLimitStore(p));
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => enforceRateLimit(stores[i % 2]!, policy, 'ada@example.com').then(() => 'ok', (err: unknown) => err)),
    );
    expect(results.filter((r) => r === 'ok')).toHaveLength(10);
    const refusal = errorFacts(results.find((r) => r !== 'ok'));
    expect(refusal).toMatchObject({ code: 'rate_limited', rateLimit: { policy: 'login-account', limit: 10, windowSeconds: 900 } });
    expect(refusal.rateLimit!.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(refusal.rateLimit!.retryAfterSeconds).toBeLessThanOrEqual(900);
    // Keys are stored hashed.
    const rows = await pools[0]!`select bucket from rate_limit_counters`;
    expect(JSON.stringify(rows)).not.toContain('ada@example.com');
  });

  test('a refund takes back one call of the current window: the next call passes again', async () => {
    const policy = { name: 'payout-request', limit: 2, windowSeconds: 3600 };
    const store = new PostgresRateLimitStore(pools[0]!);
    for (let i = 0; i < 3; i++) await store.consume(policy, 'project');
    expect((await store.consume(policy, 'project')).allowed).toBe(false);
    // Four counted: two refunds bring it back to the limit, a third below it.
    for (let i = 0; i < 3; i++) await store.refund(policy, 'project');
    expect(await store.consume(policy, 'project')).toMatchObject({ allowed: true, remaining: 0 });
    // Another key's count is not touched, and a refund of a key never counted is nothing.
    await store.refund(policy, 'other');
    expect(await store.consume(policy, 'other')).toMatchObject({ allowed: true, remaining: 1 });
  });
});

test('per-address limits count an IPv6 client by its /64 (every address of which it controls), IPv4 as it is (docs/http-edge.md#client-addresses)', () => {
  const same64 = ['2001:db8:1:2::1', '2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0DB8:0001:0002:0:0:0:9', '2001:db8:1:2::1%eth0', '2001:db8:1:2::192.0.2.1'];
  for (const ip of same64) expect(clientAddressKey(ip)).toBe('2001:0db8:0001:0002::/64');
  expect(clientAddressKey('2001:db8:1:3::1')).toBe('2001:0db8:0001:0003::/64');
  expect(clientAddressKey('::1')).toBe('0000:0000:0000:0000::/64');
  expect(clientAddressKey('fe80::1')).toBe('fe80:0000:0000:0000::/64');
  // IPv4, also as an IPv4-mapped IPv6 address (how a dual-stack socket reports it).
  expect(clientAddressKey('192.0.2.7')).toBe('192.0.2.7');
  expect(clientAddressKey('::ffff:192.0.2.7')).toBe('192.0.2.7');
  expect(clientAddressKey('::ffff:c000:207')).toBe('192.0.2.7');
  expect(clientAddressKey('')).toBe('unknown');
});
