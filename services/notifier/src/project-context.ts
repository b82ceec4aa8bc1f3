/**
 * What the notifier needs to know about a project, from the auth service (GetProjectContext):
 * its webhook URL and current signing secret, and the merchant's email. Kept between events
 * (docs/webhook-delivery.md#project-context): every event of a project would otherwise cost a call
 * to auth and the secret's decryption there. A cached context is dropped when auth says the project
 * changed (its signed `auth.project_updated`: a new URL or a rotated secret), when the NATS
 * connection was lost (an event may have been missed), and after `ttlMs` in any case. Concurrent
 * asks for one project share one call.
 */
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { timestampDate } from '@bufbuild/protobuf/wkt';

export interface ProjectContext {
  projectId: string;
  environment: 'live' | 'sandbox';
  /** Undefined when the project has no webhook. */
  webhookUrl: string | undefined;
  webhookSecret: string;
  /**
   * The secrets rotations replaced that still sign next to webhookSecret, each until its
   * `expiresAt` (docs/webhook-delivery.md#secret-rotation); empty when none does.
   */
  previousWebhookSecrets: ReadonlyArray<{ secret: string; expiresAt: Date }>;
  merchantEmail: string;
}

export interface ProjectDirectory {
  /**
   * The project's context, as cached (events and their deliveries); undefined when auth does not
   * know the project. Throws when auth is unreachable.
   */
  get(projectId: string): Promise<ProjectContext | undefined>;
  /** The project's context asked of auth now (a merchant's own request sees what they just changed); kept for `get`. */
  current(projectId: string): Promise<ProjectContext | undefined>;
}

export interface ProjectDirectoryOptions {
  /** The longest a context is used without auth being asked again. */
  ttlMs: number;
  /**
   * False: nothing is kept until `startCaching` (a directory whose invalidations are not received
   * yet must not keep what they would invalidate). Default true.
   */
  caching?: boolean;
  now?: () => number;
}

interface Flight {
  answer: Promise<ProjectContext | undefined>;
  /** The project changed while auth was being asked: the answer may predate it, so it is not kept. */
  stale: boolean;
}

export class AuthProjectDirectory implements ProjectDirectory {
  private readonly cached = new Map<string, { context: ProjectContext; expiresAt: number }>();
  private readonly inFlight = new Map<string, Flight>();
  private readonly now: () => number;
  /** False while project updates are not received (not yet, or no longer): every ask goes to auth. */
  private caching: boolean;

  constructor(
    private readonly auth: Pick<Client<typeof AuthService>, 'getProjectContext'>,
    private readonly options: ProjectDirectoryOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.caching = options.caching ?? true;
  }

  get(projectId: string): Promise<ProjectContext | undefined> {
    if (!this.caching) return this.ask(projectId);
    const hit = this.cached.get(projectId);
    if (hit !== undefined && hit.expiresAt > this.now()) return Promise.resolve(hit.context);
    const pending = this.inFlight.get(projectId);
    if (pending) return pending.answer;
    return this.ask(projectId);
  }

  current(projectId: string): Promise<ProjectContext | undefined> {
    return this.ask(projectId);
  }

  private ask(projectId: string): Promise<ProjectContext | undefined> {
    const earlier = this.inFlight.get(projectId);
    if (earlier) earlier.stale = true; // this answer is newer: the earlier one must not replace it
    const flight: Flight = { answer: this.fetch(projectId), stale: false };
    this.inFlight.set(projectId, flight);
    flight.answer = flight.answer
      .then((context) => {
        if (flight.stale || !this.caching) return context;
        // A project auth does not know is asked again next time (it may be created yet).
        if (context === undefined) this.cached.delete(projectId);
        else this.cached.set(projectId, { context, expiresAt: this.now() + this.options.ttlMs });
        return context;
      })
      .finally(() => {
        if (this.inFlight.get(projectId) === flight) this.inFlight.delete(projectId);
      });
    return flight.answer;
  }

  /** The project changed (auth.project_updated): the next ask goes to auth. */
  forget(projectId: string): void {
    this.cached.delete(projectId);
    const flight = this.inFlight.get(projectId);
    if (flight) {
      flight.stale = true;
      this.inFlight.delete(projectId);
    }
  }

  /** Auth's updates arrive from now on (the subscription is in place): contexts are kept again. */
  startCaching(): void {
    this.clear();
    this.caching = true;
  }

  /** Auth's updates no longer arrive (the subscription failed): nothing is kept from now on. */
  stopCaching(): void {
    this.caching = false;
    this.clear();
  }

  /** Everything is asked again (a gap in the events that invalidate, or one that could not be read). */
  clear(): void {
    this.cached.clear();
    for (const flight of this.inFlight.values()) flight.stale = true;
    this.inFlight.clear();
  }

  private async fetch(projectId: string): Promise<ProjectContext | undefined> {
    try {
      const res = await this.auth.getProjectContext({ projectId });
      return {
        projectId: res.projectId,
        environment: environmentName(res.environment),
        webhookUrl: res.webhookUrl === undefined || res.webhookUrl === '' ? undefined : res.webhookUrl,
        webhookSecret: res.webhookSecret,
        previousWebhookSecrets: res.previousWebhookSecrets.map((previous) => {
          if (previous.expiresAt === undefined) throw new Error('auth answered a replaced webhook secret without its expiry');
          return { secret: previous.secret, expiresAt: timestampDate(previous.expiresAt) };
        }),
        merchantEmail: res.merchantEmail,
      };
    } catch (err) {
      const code = ConnectError.from(err).code;
      // A malformed id cannot name a project either.
      if (code === Code.NotFound || code === Code.InvalidArgument) return undefined;
      throw err;
    }
  }
}

function environmentName(environment: Environment): 'live' | 'sandbox' {
  if (environment === Environment.LIVE) return 'live';
  if (environment === Environment.SANDBOX) return 'sandbox';
  throw new Error(`auth answered a project without an environment (${environment})`);
}
