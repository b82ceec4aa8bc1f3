/**
 * Every gateway replica listens to the auth service's events that invalidate what it caches:
 * `auth.api_key_revoked` and `auth.project_updated`. A plain NATS subscription suffices: the
 * outbox relay publishes to JetStream subjects, which core subscribers receive too. After a
 * reconnect the feed may have had a gap, so the whole cache is dropped.
 */
import { ApiKeyRevokedSchema, ProjectUpdatedSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/events_pb';
import { fromJson, type JsonValue } from '@bufbuild/protobuf';
import { EventNamespace, type Logger } from '@coinvoice/runtime';
import { Events, type NatsConnection, type Subscription } from 'nats';
import type { ApiKeyVerifier } from './api-keys';

export class RevocationListener {
  private subscriptions: Subscription[] = [];

  constructor(
    private readonly nats: NatsConnection,
    private readonly namespace: string,
    private readonly verifier: ApiKeyVerifier,
    private readonly logger: Logger,
  ) {}

  start(): void {
    const ns = new EventNamespace(this.namespace);
    const decode = (data: Uint8Array): JsonValue => JSON.parse(new TextDecoder().decode(data)) as JsonValue;
    this.subscriptions.push(
      this.nats.subscribe(ns.subject('auth.api_key_revoked'), {
        callback: (err, msg) => {
          if (err) return this.logger.error({ err }, 'revocation subscription failed');
          try {
            const event = fromJson(ApiKeyRevokedSchema, decode(msg.data), { ignoreUnknownFields: true });
            this.verifier.revokeHash(event.keyHash);
          } catch (parseError) {
            // An event we cannot read might have been a revocation: trust nothing cached.
            this.logger.error({ err: parseError }, 'unreadable api_key_revoked event; dropping the key cache');
            this.verifier.clear();
          }
        },
      }),
      this.nats.subscribe(ns.subject('auth.project_updated'), {
        callback: (err, msg) => {
          if (err) return;
          try {
            const event = fromJson(ProjectUpdatedSchema, decode(msg.data), { ignoreUnknownFields: true });
            this.verifier.forgetProject(event.projectId);
          } catch {
            this.verifier.clear();
          }
        },
      }),
    );
    void (async () => {
      for await (const status of this.nats.status()) {
        if (status.type === Events.Reconnect) {
          this.logger.warn('NATS reconnected: dropping cached API key verifications');
          this.verifier.clear();
        }
      }
    })();
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
