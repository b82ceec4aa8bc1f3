/**
 * Every gateway replica listens to the auth service's events that invalidate what it caches:
 * `auth.api_key_revoked` and `auth.project_updated`. A plain NATS subscription suffices: the
 * outbox relay publishes to JetStream subjects, which core subscribers receive too. After a
 * reconnect the feed may have had a gap, so the whole cache is dropped.
 *
 * Only events the auth service signed are applied (docs/events.md): a forged sessions_revoked
 * would otherwise lock a merchant out, a forged key revocation flood the cache with misses. An
 * unsigned or wrongly signed one is logged and ignored.
 */
import { ApiKeyRevokedSchema, ProjectUpdatedSchema, SessionsRevokedSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/events_pb';
import { EventNamespace, subscribeToSignedEvent, type EventVerifier, type Logger } from '@coinvoice/runtime';
import { Events, type NatsConnection, type Subscription } from 'nats';
import type { ApiKeyVerifier } from './api-keys';
import type { SessionVerifier } from './sessions';

export class RevocationListener {
  private subscriptions: Subscription[] = [];

  constructor(
    private readonly nats: NatsConnection,
    private readonly namespace: string,
    private readonly verifier: ApiKeyVerifier,
    private readonly logger: Logger,
    private readonly signatures: EventVerifier,
    private readonly sessions?: SessionVerifier,
  ) {
    signatures.requireProducers(['auth'], 'gateway revocations');
  }

  start(): void {
    const common = { namespace: new EventNamespace(this.namespace), verifier: this.signatures, logger: this.logger };
    this.subscriptions.push(
      subscribeToSignedEvent(this.nats, {
        ...common,
        type: 'auth.api_key_revoked',
        schema: ApiKeyRevokedSchema,
        onEvent: (event) => this.verifier.revokeHash(event.keyHash),
        onUnreadable: () => this.verifier.clear(),
      }),
      subscribeToSignedEvent(this.nats, {
        ...common,
        type: 'auth.project_updated',
        schema: ProjectUpdatedSchema,
        onEvent: (event) => this.verifier.forgetProject(event.projectId),
        onUnreadable: () => this.verifier.clear(),
      }),
    );
    const sessions = this.sessions;
    if (sessions) {
      this.subscriptions.push(
        subscribeToSignedEvent(this.nats, {
          ...common,
          type: 'auth.sessions_revoked',
          schema: SessionsRevokedSchema,
          onEvent: (event) => sessions.revokeSessions(event.merchantId, event.minSessionEpoch),
          onUnreadable: () => this.reloadSessionRevocations(sessions),
        }),
      );
    }
    void (async () => {
      for await (const status of this.nats.status()) {
        if (status.type === Events.Disconnect) {
          this.logger.warn('NATS disconnected: session revocations are read from auth until it is back, API keys verified again every second');
          sessions?.setFeedLive(false);
          this.verifier.setFeedLive(false);
        }
        if (status.type === Events.Reconnect) {
          this.logger.warn('NATS reconnected: dropping cached API key verifications, reloading session revocations');
          this.verifier.clear();
          this.verifier.setFeedLive(true);
          // Live again once what was revoked during the gap is loaded; until then, still polled.
          sessions
            ?.loadRevocations()
            .then(() => sessions.setFeedLive(true))
            .catch((err: unknown) => this.logger.error({ err }, 'could not reload session revocations from auth; still reading them from auth per request'));
        }
      }
    })();
  }

  private reloadSessionRevocations(sessions: SessionVerifier): void {
    sessions.loadRevocations().catch((err: unknown) => this.logger.error({ err }, 'could not reload session revocations from auth'));
  }

  /** Resolves once the server has our subscriptions (tests revoke right after start). */
  async ready(): Promise<void> {
    await this.nats.flush();
  }

  stop(): void {
    for (const sub of this.subscriptions) sub.unsubscribe();
    this.subscriptions = [];
  }
}
