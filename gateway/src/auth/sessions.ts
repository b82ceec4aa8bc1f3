/**
 * Bearer JWT authentication for the dashboard and payout routes, verified locally against the
 * auth service's public keys (JWKS). The JWKS is fetched once and cached; a token signed with a
 * key we have not seen (a rotation) triggers a refetch. Refetches for unknown kids are spaced at
 * least `unknownKidRefetchMs` apart and shared by concurrent requests: a flood of forged kids costs
 * auth one call per interval, and a genuinely new key waits at most that long — never refused.
 */
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { toJson } from '@bufbuild/protobuf';
import { GetJwksResponseSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import type { Client } from '@connectrpc/connect';
import { importJwks, verifyJwt, type VerificationKeys } from '@coinvoice/domain/credentials/jwt';
import { HttpProblem } from '../problem';
import type { MerchantPrincipal } from './principal';

export interface SessionVerifierOptions {
  /** Refetch the JWKS at least this often (new keys, retired ones dropped). */
  refreshMs?: number;
  /** At most one refetch for an unknown kid per this interval. */
  unknownKidRefetchMs?: number;
  /**
   * While the feed is live, revocations are still read again from auth when the last read is this
   * old (default 30 s): a feed that stalls without a disconnect (a hung NATS server, auth's own
   * link to it lost) otherwise let a logout go unseen for minutes (docs/architecture.md#starting-while-nats-is-down).
   */
  reloadWhileLiveMs?: number;
  /** The clock of the reload above (tests). */
  clock?: () => number;
  now?: () => Date;
}

/** While the revocation feed is down, sessions are checked against auth's list at most this often. */
const POLL_WHILE_FEED_DOWN_MS = 1_000;

export function invalidToken(detail: string): HttpProblem {
  return new HttpProblem(401, 'invalid_token', detail, [], { 'www-authenticate': 'Bearer' });
}

export class SessionVerifier {
  /** Per merchant, the lowest session epoch still valid (logout, password change, operator change). */
  private readonly minEpochs = new Map<string, number>();
  /** The first load of the revocation list; no session token is accepted before it succeeded. */
  private initialLoad: Promise<void> | undefined;
  private keys: VerificationKeys | undefined;
  private fetchedAt = 0;
  private lastUnknownKidFetch = 0;
  private fetching: Promise<VerificationKeys> | undefined;
  private unknownKidRefetch: Promise<VerificationKeys> | undefined;
  /** Told of the merchants whose older sessions were ended (an open event stream listens). */
  private readonly revocationListeners = new Set<(merchantId: string) => void>();
  /** False while the revocation feed (NATS) is down: revocations are then read from auth. */
  private feedLive = true;
  private lastPolled = 0;
  private polling: Promise<void> | undefined;
  /** When revocations were last asked of auth while the feed is live (RELOAD_WHILE_LIVE_MS). */
  private lastReload = 0;
  private reloading: Promise<void> | undefined;

  constructor(
    private readonly auth: Client<typeof AuthService>,
    private readonly options: SessionVerifierOptions = {},
  ) {}

  private async fetchKeys(): Promise<VerificationKeys> {
    if (!this.fetching) {
      this.fetching = this.auth
        .getJwks({})
        .then((res) => {
          this.keys = importJwks(toJson(GetJwksResponseSchema, res));
          this.fetchedAt = Date.now();
          return this.keys;
        })
        .finally(() => {
          this.fetching = undefined;
        });
    }
    return this.fetching;
  }

  private async currentKeys(): Promise<VerificationKeys> {
    const refreshMs = this.options.refreshMs ?? 5 * 60_000;
    if (!this.keys || Date.now() - this.fetchedAt > refreshMs) return this.fetchKeys();
    return this.keys;
  }

  private refetchForUnknownKid(): Promise<VerificationKeys> {
    if (!this.unknownKidRefetch) {
      const wait = this.lastUnknownKidFetch + (this.options.unknownKidRefetchMs ?? 1_000) - Date.now();
      this.unknownKidRefetch = (async () => {
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        this.lastUnknownKidFetch = Date.now();
        return this.fetchKeys();
      })().finally(() => {
        this.unknownKidRefetch = undefined;
      });
    }
    return this.unknownKidRefetch;
  }

  async verify(authorization: string | undefined): Promise<MerchantPrincipal> {
    if (!authorization) throw invalidToken('an Authorization: Bearer <token> header is required');
    const match = /^Bearer ([A-Za-z0-9_.-]+)$/i.exec(authorization.trim());
    if (!match?.[1]) throw invalidToken('the Authorization header must be "Bearer <token>"');
    const token = match[1];
    await this.ensureRevocations();
    if (!this.feedLive) await this.pollRevocations();
    else await this.reloadIfStale();
    const now = this.options.now?.() ?? new Date();
    let result = await verifyJwt(token, await this.currentKeys(), now);
    if (!result.valid && result.reason === 'unknown_key') {
      result = await verifyJwt(token, await this.refetchForUnknownKid(), now);
    }
    if (!result.valid) {
      throw invalidToken(result.reason === 'expired' ? 'the session token has expired' : 'the session token is invalid');
    }
    if (result.claims.sv < (this.minEpochs.get(result.claims.sub) ?? 0)) throw invalidToken('the session has ended (logout or password change)');
    return { kind: 'merchant', merchantId: result.claims.sub, email: result.claims.email, admin: result.claims.admin === true, token };
  }

  /**
   * The revocation feed went down (NATS disconnected) or came back. While it is down, a logout or
   * password change reaches no replica over NATS, so each verification reads the revocations from
   * auth, at most once per POLL_WHILE_FEED_DOWN_MS and shared by concurrent requests: a session
   * still ends within about a second (an outside review used a token for the whole outage). A
   * token is refused (503) when auth cannot say either.
   */
  setFeedLive(live: boolean): void {
    this.feedLive = live;
    if (!live) this.lastPolled = 0;
  }

  private pollRevocations(): Promise<void> {
    if (Date.now() - this.lastPolled < POLL_WHILE_FEED_DOWN_MS) return Promise.resolve();
    this.polling ??= this.loadRevocations()
      .then(() => {
        this.lastPolled = Date.now();
      })
      .catch(() => {
        throw new HttpProblem(503, 'service_unavailable', 'a dependency is unavailable; try again shortly');
      })
      .finally(() => {
        this.polling = undefined;
      });
    return this.polling;
  }

  /**
   * The feed is live, yet what it delivered is bounded in age: once the last read from auth is
   * `reloadWhileLiveMs` old, one request (the others share it) reads the list again. A failure
   * keeps the list as it is (auth down is not a reason to refuse every session while NATS works).
   */
  private reloadIfStale(): Promise<void> {
    const clock = this.options.clock ?? Date.now;
    if (clock() - this.lastReload < (this.options.reloadWhileLiveMs ?? 30_000)) return Promise.resolve();
    this.lastReload = clock();
    this.reloading ??= this.loadRevocations()
      .catch(() => undefined)
      .finally(() => {
        this.reloading = undefined;
      });
    return this.reloading;
  }

  /** Tokens of `merchantId` below `minEpoch` are refused from now on (pushed by auth over NATS). */
  revokeSessions(merchantId: string, minEpoch: number): void {
    if (minEpoch <= (this.minEpochs.get(merchantId) ?? 0)) return;
    this.minEpochs.set(merchantId, minEpoch);
    for (const listener of this.revocationListeners) listener(merchantId);
  }

  /** Calls `listener` with each merchant whose sessions below an epoch end from now on; returns the unsubscribe. */
  onRevocation(listener: (merchantId: string) => void): () => void {
    this.revocationListeners.add(listener);
    return () => this.revocationListeners.delete(listener);
  }

  ensureRevocations(): Promise<void> {
    this.initialLoad ??= this.loadRevocations().catch((err: unknown) => {
      this.initialLoad = undefined; // asked again by the next request
      throw err;
    });
    return this.initialLoad;
  }

  /**
   * Loads every revocation whose tokens may be unexpired (at start, and after a gap in the NATS
   * feed). Until it succeeds after a gap no session token is trusted.
   */
  async loadRevocations(): Promise<void> {
    this.lastReload = (this.options.clock ?? Date.now)();
    const res = await this.auth.listSessionRevocations({});
    for (const revocation of res.revocations) this.revokeSessions(revocation.merchantId, revocation.minSessionEpoch);
  }
}
