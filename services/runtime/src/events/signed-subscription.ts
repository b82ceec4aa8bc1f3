/**
 * A plain NATS subscription to one event type, for a process that keeps a cache the event
 * invalidates (the gateway's API keys, sessions and projects; the notifier's project contexts,
 * docs/webhook-delivery.md#project-context). Core subscribers receive what the outbox relay
 * publishes to JetStream subjects, on every replica, with nothing to acknowledge.
 *
 * Only an event its producer signed is applied (docs/events.md): a forged invalidation could lock
 * a merchant out or flood a cache with misses. An unsigned or wrongly signed one is logged and
 * ignored. A signed event whose body cannot be read calls `onUnreadable`: it may have been an
 * invalidation, so the caller trusts nothing it cached.
 */
import { fromJson, type DescMessage, type JsonValue, type MessageShape } from '@bufbuild/protobuf';
import type { NatsConnection, Subscription } from 'nats';
import type { Logger } from '../log';
import { MSG_ID_HEADER, type EventNamespace } from './bus';
import type { EventVerifier } from './signing';

export interface SignedEventSubscription<Desc extends DescMessage> {
  namespace: EventNamespace;
  /** The event type, e.g. `auth.project_updated`; its first token names the producer whose key must have signed it. */
  type: string;
  schema: Desc;
  verifier: EventVerifier;
  logger: Logger;
  onEvent: (event: MessageShape<Desc>) => void;
  /** A signed event that could not be read (or one whose `onEvent` threw): drop what it might have invalidated. */
  onUnreadable: () => void;
  /**
   * The subscription failed (a permissions violation, say): nats.js ends it, and no invalidation
   * arrives any more. Default: `onUnreadable`. A cache that cannot be invalidated should stop caching.
   */
  onSubscriptionError?: (err: Error) => void;
}

const decoder = new TextDecoder();

export function subscribeToSignedEvent<Desc extends DescMessage>(nats: NatsConnection, options: SignedEventSubscription<Desc>): Subscription {
  const { type, verifier, logger } = options;
  const producer = type.split('.')[0] ?? '';
  return nats.subscribe(options.namespace.subject(type), {
    callback: (err, msg) => {
      if (err) {
        logger.error({ err, eventType: type }, 'event subscription failed: its invalidations no longer arrive');
        (options.onSubscriptionError ?? options.onUnreadable)(err);
        return;
      }
      const eventId = msg.headers?.get(MSG_ID_HEADER) ?? '';
      const rejection = verifier.check(producer, msg.subject, eventId, msg.data, msg.headers);
      if (rejection !== undefined) {
        logger.error({ subject: msg.subject, eventId, reason: rejection }, 'event refused (signature missing or wrong); ignored');
        return;
      }
      let event: MessageShape<Desc>;
      try {
        event = fromJson(options.schema, JSON.parse(decoder.decode(msg.data)) as JsonValue, { ignoreUnknownFields: true });
      } catch (parseError) {
        logger.error({ err: parseError, eventId, eventType: type }, 'unreadable event; dropping what it might have invalidated');
        options.onUnreadable();
        return;
      }
      try {
        options.onEvent(event);
      } catch (applyError) {
        // Thrown here, it would end the connection's reader (nats.js calls back from its parser).
        logger.error({ err: applyError, eventId, eventType: type }, 'event could not be applied; dropping what it might have invalidated');
        options.onUnreadable();
      }
    },
  });
}
