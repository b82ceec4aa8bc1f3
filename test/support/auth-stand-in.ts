/**
 * A stand-in for the auth service's GetProjectContext, for testing the services that ask it
 * (notifier, payout): a real gRPC server on 127.0.0.1 answering from projects the test sets.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { startStandInServer, type StandInServer } from './grpc-stand-in';
import { AuthService, type GetProjectContextResponseSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';

export type ProjectContextReply = MessageInitShape<typeof GetProjectContextResponseSchema>;

/**
 * GetProjectContext over real gRPC, answering from a map the test controls (unknown: NotFound);
 * VerifyOperatorToken answers for the tokens in `operatorTokens` (token → merchant id), refuses
 * any other as auth does (Unauthenticated).
 */
export class AuthStandIn<Project> {
  readonly projects = new Map<string, Project>();
  readonly operatorTokens = new Map<string, string>();
  calls = 0;
  /** When set, every call fails with Unavailable (auth down). */
  down = false;
  private server: StandInServer | undefined;
  url = '';

  /** `contextOf` builds the answer for a known project. */
  constructor(private readonly contextOf: (projectId: string, project: Project) => ProjectContextReply) {}

  async start(): Promise<this> {
    this.server = await startStandInServer((router) => {
      router.rpc(AuthService.method.getProjectContext, async (req) => {
        this.calls++;
        if (this.down) throw new ConnectError('auth is down (test)', Code.Unavailable);
        const project = this.projects.get(req.projectId);
        if (!project) throw new ConnectError('project not found', Code.NotFound);
        return this.contextOf(req.projectId, project);
      });
      router.rpc(AuthService.method.verifyOperatorToken, async (req) => {
        const merchantId = this.operatorTokens.get(req.token);
        if (!merchantId) throw new ConnectError('the operator session token is invalid', Code.Unauthenticated);
        return { merchantId, email: 'operator@example.com' };
      });
    });
    this.url = this.server.url;
    return this;
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }
}
