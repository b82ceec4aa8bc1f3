/**
 * What the notifier needs to know about a project, from the auth service (GetProjectContext):
 * its webhook URL and current signing secret, and the merchant's email. Asked fresh every time
 * (a rotated secret signs the very next attempt); concurrent asks for one project share one call.
 */
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';

export interface ProjectContext {
  projectId: string;
  environment: 'live' | 'sandbox';
  /** Undefined when the project has no webhook. */
  webhookUrl: string | undefined;
  webhookSecret: string;
  merchantEmail: string;
}

export interface ProjectDirectory {
  /** The project's context; undefined when auth does not know the project. Throws when auth is unreachable. */
  get(projectId: string): Promise<ProjectContext | undefined>;
}

export class AuthProjectDirectory implements ProjectDirectory {
  private readonly inFlight = new Map<string, Promise<ProjectContext | undefined>>();

  constructor(private readonly auth: Client<typeof AuthService>) {}

  get(projectId: string): Promise<ProjectContext | undefined> {
    const pending = this.inFlight.get(projectId);
    if (pending) return pending;
    const call = this.fetch(projectId).finally(() => this.inFlight.delete(projectId));
    this.inFlight.set(projectId, call);
    return call;
  }

  private async fetch(projectId: string): Promise<ProjectContext | undefined> {
    try {
      const res = await this.auth.getProjectContext({ projectId });
      return {
        projectId: res.projectId,
        environment: environmentName(res.environment),
        webhookUrl: res.webhookUrl === undefined || res.webhookUrl === '' ? undefined : res.webhookUrl,
        webhookSecret: res.webhookSecret,
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
