/**
 * subscribeToSignedEvent against a real NATS server: a signed event reaches onEvent; an unsigned
 * one does not; an event whose onEvent throws drops the cache (onUnreadable) and the subscription —
 * and the connection's reader — keep working for the next one.
 */
import { headers as natsHeaders, type NatsConnection } from 'nats';
import { ProjectUpdatedSchema } from '../src/gen/coinvoice/auth/v1/events_pb';
import { connectNats, EventNamespace } from '../src/events/bus';
import { EventVerifier, parseVerifyKeys } from '../src/events/signing';
import { subscribeToSignedEvent } from '../src/events/signed-subscription';
import { createLogger } from '../src/log';
import { signInto, testEventKeys } from '../../../test/support/event-keys';
import { testNatsUrl, uniqueName } from '../../../test/support/infra';
import { waitFor } from '../../../test/support/async';

const logger = createLogger({ service: 'signed-subscription-test', level: 'silent' });
const verifier = new EventVerifier(parseVerifyKeys(testEventKeys().verifyKeys) ?? new Map());
let nats: NatsConnection;
const namespace = new EventNamespace(uniqueName('signedsub'));

beforeAll(async () => {
  nats = await connectNats({ url: testNatsUrl(), name: 'signed-subscription-test' });
});
afterAll(async () => {
  await nats?.close();
});

let sequence = 0;
function publish(projectId: string, signed: boolean): void {
  const subject = namespace.subject('auth.project_updated');
  const id = `evt-${++sequence}`;
  const body = new TextEncoder().encode(JSON.stringify({ projectId }));
  const headers = natsHeaders();
  headers.set('Nats-Msg-Id', id);
  nats.publish(subject, body, { headers: signed ? signInto(headers, testEventKeys(), subject, id, body) : headers });
}

test('signed events are applied, unsigned ones ignored; an event whose application throws drops the cache and the next one still arrives', async () => {
  const applied: string[] = [];
  let dropped = 0;
  const subscription = subscribeToSignedEvent(nats, {
    namespace,
    type: 'auth.project_updated',
    schema: ProjectUpdatedSchema,
    verifier,
    logger,
    onEvent: (event) => {
      if (event.projectId === 'explodes') throw new Error('a bug in the cache');
      applied.push(event.projectId);
    },
    onUnreadable: () => dropped++,
  });
  try {
    await nats.flush();
    publish('p-1', true);
    publish('p-forged', false);
    publish('explodes', true);
    publish('p-2', true);
    await waitFor('the signed events', async () => applied.length === 2, 5_000);
    expect(applied).toEqual(['p-1', 'p-2']);
    expect(dropped).toBe(1);
    expect(nats.isClosed()).toBe(false);
  } finally {
    subscription.unsubscribe();
  }
});
