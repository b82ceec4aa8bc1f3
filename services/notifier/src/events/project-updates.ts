/**
 * Keeps the notifier's cached project contexts true (docs/webhook-delivery.md#project-context):
 * every replica listens to auth's signed `auth.project_updated` (a new webhook URL, a rotated
 * secret) and forgets that project; after a reconnect an event may have been missed, so it
 * forgets every project. If the subscription fails (a NATS user without the permission), nothing is
 * cached any more.
 */
import { EventNamespace, subscribeToSignedEvent, type EventVerifier, type Logger } from '@coinvoice/runtime';
import { ProjectUpdatedSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/events_pb';
import { Events, type NatsConnection, type Subscription } from 'nats';

export interface ForgettingDirectory {
  forget(projectId: string): void;
  clear(): void;
  startCaching(): void;
  stopCaching(): void;
}

export class ProjectUpdatesListener {
  private subscription: Subscription | undefined;
  /** The subscription failed: the directory stays without a cache. */
  private failed = false;

  constructor(
    private readonly deps: { nats: NatsConnection; namespace: string; verifier: EventVerifier; logger: Logger; directory: ForgettingDirectory },
  ) {
    deps.verifier.requireProducers(['auth'], 'notifier project updates');
  }

  async start(): Promise<void> {
    const { nats, directory, logger } = this.deps;
    this.subscription = subscribeToSignedEvent(nats, {
      namespace: EventNamespace.of(this.deps.namespace),
      type: 'auth.project_updated',
      schema: ProjectUpdatedSchema,
      verifier: this.deps.verifier,
      logger,
      onEvent: (event) => directory.forget(event.projectId),
      onUnreadable: () => directory.clear(),
      // No invalidation can arrive any more (e.g. the NATS user may not subscribe): a kept secret
      // or URL could then be used for a whole TTL after a change. Ask auth every time instead.
      onSubscriptionError: () => {
        this.failed = true;
        logger.error('notifier: auth.project_updated cannot be received; project contexts are no longer cached (every event asks auth)');
        directory.stopCaching();
      },
    });
    void (async () => {
      for await (const status of nats.status()) {
        if (status.type === Events.Reconnect) {
          logger.warn('NATS reconnected: dropping cached project contexts');
          directory.clear();
        }
      }
    })();
    // The server has the subscription before the first event is handled; only then may contexts be
    // kept (the notifier's directory keeps none before: docs/architecture.md#starting-while-nats-is-down).
    await nats.flush();
    if (!this.failed) directory.startCaching();
  }

  /** Unsubscribes; from then on no invalidation arrives, so nothing is kept (until a new start). */
  stop(): void {
    this.subscription?.unsubscribe();
    this.subscription = undefined;
    this.deps.directory.stopCaching();
  }
}
