/**
 * A dependency requests do not need (NATS) makes the process NOT_SERVING overall when down, but
 * leaves it ready for traffic (`readiness`); one requests need (Postgres) fails both.
 */
import { HealthMonitor, READINESS_SERVICE, ServingStatus } from '../src/rpc/health';

test('NATS down: overall NOT_SERVING, still ready for traffic; Postgres down: neither', async () => {
  const up = { postgres: true, nats: false };
  const health = new HealthMonitor(['coinvoice.test.v1.TestService'], [
    { name: 'postgres', check: async () => { if (!up.postgres) throw new Error('connection refused'); } },
    { name: 'nats', check: async () => { if (!up.nats) throw new Error('DISCONNECT'); }, neededForRequests: false },
  ]);
  expect(await health.status('')).toBe(ServingStatus.NOT_SERVING);
  expect(await health.status('coinvoice.test.v1.TestService')).toBe(ServingStatus.NOT_SERVING);
  expect(await health.status(READINESS_SERVICE)).toBe(ServingStatus.SERVING);
  expect(await health.report()).toEqual({ serving: false, acceptingRequests: true, dependencies: { postgres: 'up', nats: 'DISCONNECT' } });

  up.postgres = false;
  await new Promise((r) => setTimeout(r, 300)); // past the answer cache
  expect(await health.status(READINESS_SERVICE)).toBe(ServingStatus.NOT_SERVING);
  expect(await health.report()).toEqual({ serving: false, acceptingRequests: false, dependencies: { postgres: 'connection refused', nats: 'DISCONNECT' } });

  up.postgres = true;
  up.nats = true;
  await new Promise((r) => setTimeout(r, 300));
  expect(await health.status('')).toBe(ServingStatus.SERVING);
});

test('an optional dependency that does not answer does not hold up the readiness answer', async () => {
  const health = new HealthMonitor([], [
    { name: 'postgres', check: async () => undefined },
    { name: 'nats', check: () => new Promise<void>(() => undefined), neededForRequests: false },
  ]);
  const started = Date.now();
  expect(await health.status(READINESS_SERVICE)).toBe(ServingStatus.SERVING);
  expect(Date.now() - started).toBeLessThan(600);
  expect((await health.report()).dependencies.nats).toMatch(/no answer within/);
});
