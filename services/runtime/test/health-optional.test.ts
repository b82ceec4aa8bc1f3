/** A dependency marked `required: false` (NATS) is reported when down but keeps the process SERVING. */
import { HealthMonitor, ServingStatus } from '../src/rpc/health';

test('an optional dependency down: reported in the readiness report, still SERVING; a required one down: NOT_SERVING', async () => {
  const up = { postgres: true, nats: false };
  const health = new HealthMonitor(['coinvoice.test.v1.TestService'], [
    { name: 'postgres', check: async () => { if (!up.postgres) throw new Error('connection refused'); } },
    { name: 'nats', check: async () => { if (!up.nats) throw new Error('DISCONNECT'); }, required: false },
  ]);
  expect(await health.status('')).toBe(ServingStatus.SERVING);
  expect(await health.report()).toEqual({ serving: true, dependencies: { postgres: 'up', nats: 'DISCONNECT' } });

  up.postgres = false;
  await new Promise((r) => setTimeout(r, 300)); // past the answer cache
  expect(await health.status('')).toBe(ServingStatus.NOT_SERVING);
  expect(await health.report()).toEqual({ serving: false, dependencies: { postgres: 'connection refused', nats: 'DISCONNECT' } });
});

test('an optional dependency that does not answer does not hold up the readiness answer', async () => {
  const health = new HealthMonitor([], [
    { name: 'postgres', check: async () => undefined },
    { name: 'nats', check: () => new Promise<void>(() => undefined), required: false },
  ]);
  const started = Date.now();
  expect(await health.status('')).toBe(ServingStatus.SERVING);
  expect(Date.now() - started).toBeLessThan(600);
  expect((await health.report()).dependencies.nats).toMatch(/no answer within/);
});
