/**
 * A stand-in for the notifier's emails to merchants (SendPayoutVerificationEmail,
 * SendEmailVerificationEmail, SendSignUpAttemptEmail), for testing the services that send them: a
 * real gRPC server on 127.0.0.1 keeping every request, as the notifier would have emailed it.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { startStandInServer, type StandInServer } from './grpc-stand-in';
import {
  EmailCodePurpose,
  NotifierService,
  type SendAutoSweepVerificationEmailRequest,
  type SendEmailVerificationEmailRequest,
  type SendPayoutVerificationEmailRequest,
  type SendSignUpAttemptEmailRequest,
} from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';

export class NotifierStandIn {
  readonly payoutEmails: SendPayoutVerificationEmailRequest[] = [];
  readonly autoSweepEmails: SendAutoSweepVerificationEmailRequest[] = [];
  readonly verificationEmails: SendEmailVerificationEmailRequest[] = [];
  readonly signUpAttemptEmails: SendSignUpAttemptEmailRequest[] = [];
  /** When set, every call fails with Unavailable (notifier down). */
  down = false;
  /** When set, payout emails are answered only once it resolves (a slow SMTP server). */
  payoutEmailsWaitFor: Promise<void> | undefined;
  /** Payout email calls received, answered yet or not. */
  payoutEmailCalls = 0;
  private server: StandInServer | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = await startStandInServer((router) => {
      router.rpc(NotifierService.method.sendPayoutVerificationEmail, async (req) => {
        this.payoutEmailCalls++;
        if (this.payoutEmailsWaitFor) await this.payoutEmailsWaitFor;
        if (this.down) throw new ConnectError('notifier is down (test)', Code.Unavailable);
        this.payoutEmails.push(req);
        return { messageId: `<${this.payoutEmails.length}@test>` };
      });
      router.rpc(NotifierService.method.sendAutoSweepVerificationEmail, async (req) => {
        if (this.down) throw new ConnectError('notifier is down (test)', Code.Unavailable);
        this.autoSweepEmails.push(req);
        return { messageId: `<a${this.autoSweepEmails.length}@test>` };
      });
      router.rpc(NotifierService.method.sendEmailVerificationEmail, async (req) => {
        if (this.down) throw new ConnectError('notifier is down (test)', Code.Unavailable);
        this.verificationEmails.push(req);
        return { messageId: `<v${this.verificationEmails.length}@test>` };
      });
      router.rpc(NotifierService.method.sendSignUpAttemptEmail, async (req) => {
        if (this.down) throw new ConnectError('notifier is down (test)', Code.Unavailable);
        this.signUpAttemptEmails.push(req);
        return { messageId: `<s${this.signUpAttemptEmails.length}@test>` };
      });
    });
    this.url = this.server.url;
    return this;
  }

  /** The code emailed for `payoutId` (the only place it exists besides the merchant's mailbox). */
  payoutCode(payoutId: string): string | undefined {
    return this.payoutEmails.find((e) => e.payoutId === payoutId)?.code;
  }

  /** The latest auto-sweep code emailed for `projectId`. */
  autoSweepCode(projectId: string): string | undefined {
    return this.autoSweepEmails.filter((e) => e.projectId === projectId).at(-1)?.code;
  }

  /** The sign-up codes emailed to `email` (normalised, as the service sends it), oldest first. */
  signUpCodes(email: string): string[] {
    return this.verificationEmails.filter((e) => e.email === email && e.purpose === EmailCodePurpose.SIGN_UP).map((e) => e.code);
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }
}
