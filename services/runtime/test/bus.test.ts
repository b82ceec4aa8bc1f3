/**
 * The services' NATS connection (events/bus.ts connectNats) against the test NATS server.
 */
import type { ConnectionOptions, NatsConnection } from 'nats';
import { connectNats } from '../src/events/bus';
import { testNatsUrl } from '../../../test/support/infra';

let nc: NatsConnection | undefined;

afterAll(async () => {
  await nc?.close();
});

test('requests (JetStream publishes and pulls among them) build no Error objects for async traces (docs/performance.md#events)', async () => {
  nc = await connectNats({ url: testNatsUrl(), name: 'bus-test' });
  // nats.js reads this option on every request: with it unset, two Errors (stacks captured) per publish.
  expect((nc as NatsConnection & { options: ConnectionOptions }).options.noAsyncTraces).toBe(true);
  // A request with no responder still fails as it should, saying why.
  await expect(nc.request('bus-test.nobody', new Uint8Array(), { timeout: 500 })).rejects.toThrow(/503|no responders/i);
});
