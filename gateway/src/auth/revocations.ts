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
import { fromJson, type JsonValue } from '@bufbuild/protobuf';
import { EventNamespace, MSG_ID_HEADER, SIGNATURE_HEADER, type EventVerifier, type Logger } from '@coinvoice/runtime';
import { Events, type Msg, type NatsConnection, type Subscription } from 'nats';
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

  /** The message's body when auth signed it; undefined (logged) otherwise. */
  private signedBody(msg: Msg): Uint8Array | undefined {
    const eventId = msg.headers?.get(MSG_ID_HEADER) ?? '';
    const rejection = this.signatures.check('auth', msg.subject, eventId, msg.data, msg.headers?.get(SIGNATURE_HEADER) || undefined);
    if (rejection === undefined) return msg.data;
    this.logger.error({ subject: msg.subject, eventId, reason: rejection }, 'revocation event refused (signature missing or wrong); ignored');
    return undefined;
  }

  start(): void {
    const ns = new EventNamespace(this.namespace);
    const decode = (data: Uint8Array): JsonValue => JSON.parse(new TextDecoder().decode(data)) as JsonValue;
    this.subscriptions.push(
      this.nats.subscribe(ns.subject('auth.api_key_revoked'), {
        callback: (err, msg) => {
          if (err) return this.logger.error({ err }, 'revocation subscription failed');
          const body = this.signedBody(msg);
          if (!body) return;
          try {
            const event = fromJson(ApiKeyRevokedSchema, decode(body), { ignoreUnknownFields: true });
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
          const body = this.signedBody(msg);
          if (!body) return;
          try {
            const event = fromJson(ProjectUpdatedSchema, decode(body), { ignoreUnknownFields: true });
            this.verifier.forgetProject(event.projectId);
          } catch {
            this.verifier.clear();
          }
        },
      }),
    );
    const sessions = this.sessions;
    if (sessions) {
      this.subscriptions.push(
        this.nats.subscribe(ns.subject('auth.sessions_revoked'), {
          callback: (err, msg) => {
            if (err) return this.logger.error({ err }, 'session revocation subscription failed');
            const body = this.signedBody(msg);
            if (!body) return;
            try {
              const event = fromJson(SessionsRevokedSchema, decode(body), { ignoreUnknownFields: true });
              sessions.revokeSessions(event.merchantId, event.minSessionEpoch);
            } catch (parseError) {
              this.logger.error({ err: parseError }, 'unreadable sessions_revoked event; reloading revocations');
              this.reloadSessionRevocations(sessions);
            }
          },
        }),
      );
    }
    void (async () => {
      for await (const status of this.nats.status()) {
        if (status.type === Events.Reconnect) {
          this.logger.warn('NATS reconnected: dropping cached API key verifications, reloading session revocations');
          this.verifier.clear();
          if (sessions) this.reloadSessionRevocations(sessions);
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
