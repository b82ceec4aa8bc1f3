/** Readiness follows the dependencies; liveness only the process (a DB outage restarts nothing). */
import { HealthMonitor, LIVENESS_SERVICE, ServingStatus } from '../src/rpc/health';

function monitor(dbUp: { value: boolean }) {
  return new HealthMonitor(['coinvoice.test.v1.TestService'], [
    { name: 'postgres', check: async () => { if (!dbUp.value) throw new Error('connection refused'); } },
  ]);
}

test('a dependency down makes the service NOT_SERVING but leaves liveness SERVING', async () => {
  const dbUp = { value: false };
  const health = monitor(dbUp);
  expect(await health.status('')).toBe(ServingStatus.NOT_SERVING);
  expect(await health.status('coinvoice.test.v1.TestService')).toBe(ServingStatus.NOT_SERVING);
  expect(await health.status(LIVENESS_SERVICE)).toBe(ServingStatus.SERVING);
  expect((await health.report()).dependencies).toEqual({ postgres: 'connection refused' });
  expect(await health.status('readiness')).toBe(ServingStatus.NOT_SERVING);
});

test('the service is SERVING again once the dependency answers', async () => {
  const dbUp = { value: false };
  const health = monitor(dbUp);
  expect(await health.status('')).toBe(ServingStatus.NOT_SERVING);
  dbUp.value = true;
  await new Promise((r) => setTimeout(r, 300)); // past the answer cache
  expect(await health.status('')).toBe(ServingStatus.SERVING);
});

test('shutting down fails both, so Kubernetes stops routing and does not wait on a dying pod', async () => {
  const health = monitor({ value: true });
  health.markShuttingDown();
  expect(await health.status('')).toBe(ServingStatus.NOT_SERVING);
  expect(await health.status(LIVENESS_SERVICE)).toBe(ServingStatus.NOT_SERVING);
  expect(await health.status('no.such.Service')).toBe(ServingStatus.SERVICE_UNKNOWN);
});
