/**
 * Email: the payout verification code (docs/architecture.md#payouts), the email verification and sign-up codes, and
 * the note to an owner that someone tried to sign up with their email, sent over SMTP with nodemailer. In
 * development without SMTP_URL each email is written as an .eml file to a mailbox folder instead,
 * so `npm start` works on a fresh machine and the code can still be read.
 *
 * The code is a secret: it goes into the message and nowhere else. Nothing here logs a message,
 * its text or its subject; logs name the payout id and the message id only.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { Logger } from '@coinvoice/runtime';
import {
  EmailCodePurpose,
  type SendEmailVerificationEmailRequest,
  type SendAutoSweepVerificationEmailRequest,
  type SendPayoutVerificationEmailRequest,
  type SendSignUpAttemptEmailRequest,
} from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import nodemailer from 'nodemailer';

export interface EmailMessage {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  /** Where mail goes, for the start-up log line (no credentials). */
  readonly description: string;
  /** Resolves once the SMTP server accepted the message (or the file is written). */
  send(message: EmailMessage): Promise<{ messageId: string }>;
  close(): void;
}

export interface MailerConfig {
  SMTP_URL: string;
  EMAIL_FROM: string;
  MAILBOX_DIR: string;
}

/** SMTP when SMTP_URL is set; otherwise (development only: the setting is required in production) the mailbox folder. */
export function createMailer(config: MailerConfig): Mailer {
  if (config.SMTP_URL !== '') return smtpMailer(config.SMTP_URL, config.EMAIL_FROM);
  return mailboxMailer(mailboxDir(config.MAILBOX_DIR), config.EMAIL_FROM);
}

export function mailboxDir(configured: string): string {
  if (configured !== '') return path.resolve(configured);
  const dataDir = process.env.COINVOICE_DATA_DIR;
  return path.resolve(dataDir ? path.join(dataDir, 'mailbox') : path.join(process.cwd(), '.data', 'mailbox'));
}

function smtpMailer(url: string, from: string): Mailer {
  const transport = nodemailer.createTransport({
    url,
    // One open connection reused for every message: a new SMTP session per email capped sending
    // at ~5 a second, and a queue of verification codes could outlive their 15 minutes.
    pool: true,
    maxConnections: 2,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
  });
  const parsed = new URL(url);
  return {
    description: `SMTP ${parsed.protocol}//${parsed.host}`,
    async send(message) {
      const info = await transport.sendMail({ from, ...message });
      return { messageId: String(info.messageId) };
    },
    close: () => transport.close(),
  };
}

function mailboxMailer(dir: string, from: string): Mailer {
  const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  return {
    description: `mailbox folder ${dir} (development: SMTP_URL is not set)`,
    async send(message) {
      const info = await transport.sendMail({ from, ...message });
      mkdirSync(dir, { recursive: true });
      const file = path.join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}-${String(info.messageId).replace(/[^A-Za-z0-9@._-]/g, '')}.eml`);
      writeFileSync(file, info.message as Buffer, { mode: 0o600 });
      return { messageId: String(info.messageId) };
    },
    close: () => transport.close(),
  };
}

/** The verification email for a payout. Subject without the code (it shows in notifications and lists). */
export function payoutVerificationEmail(event: SendPayoutVerificationEmailRequest): EmailMessage {
  const expires = event.expiresAt ? timestampDate(event.expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z') : undefined;
  const sandbox = event.environment === 'sandbox' ? ' (sandbox)' : '';
  return {
    to: event.email,
    subject: `Confirm your payout of ${event.amount} ${event.currency}${sandbox}`,
    text: [
      `Your verification code for the payout of ${event.amount} ${event.currency}${sandbox} is:`,
      '',
      `    ${event.code}`,
      '',
      // What the code confirms, so a merchant whose request was tampered with sees it before confirming.
      `Amount: ${event.amount} ${event.currency}`,
      ...(event.address ? [`To the address: ${event.address}`] : []),
      ...(event.network ? [`On the network: ${event.network}`] : []),
      '',
      `Enter the code to confirm the payout (id ${event.payoutId}) only if this amount, address and network are yours.` +
        (expires ? ` It expires at ${expires} (UTC).` : ''),
      '',
      'If you did not request this payout, or the address is not yours, do not share this code with anyone: cancel the payout and change your password.',
      '',
      '— coinvoice',
    ].join('\n'),
  };
}

/**
 * The code that confirms a project's new auto-sweep destinations (services/payout/README.md
 * "Auto-sweep"): each destination named, so a merchant whose session was hijacked sees where the
 * money would go before confirming. Subject without the code.
 */
export function autoSweepVerificationEmail(request: SendAutoSweepVerificationEmailRequest): EmailMessage {
  const expires = request.expiresAt ? timestampDate(request.expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z') : undefined;
  const sandbox = request.environment === 'sandbox' ? ' (sandbox: auto-sweep is never carried out for sandbox projects)' : '';
  return {
    to: request.email,
    subject: `Confirm your auto-sweep destination${request.destinations.length === 1 ? '' : 's'}`,
    text: [
      `Your verification code for the auto-sweep configuration of project ${request.projectId}${sandbox} is:`,
      '',
      `    ${request.code}`,
      '',
      'Once confirmed, whenever the available balance of a currency below reaches its threshold, the whole balance is paid out to its address:',
      ...request.destinations.map((d) => `  ${d.currency}: to ${d.address} from ${d.threshold} ${d.currency}`),
      '',
      `Enter the code only if these addresses are yours.${expires ? ` It expires at ${expires} (UTC).` : ''}`,
      '',
      'If you did not change this configuration, do not share this code with anyone and change your password.',
      '',
      '— coinvoice',
    ].join('\n'),
  };
}

/** The code that proves a merchant's email address, or that finishes a sign-up. */
export function emailVerificationEmail(request: SendEmailVerificationEmailRequest): EmailMessage {
  const expires = request.expiresAt ? timestampDate(request.expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z') : undefined;
  const expiry = expires ? ` It expires at ${expires} (UTC).` : '';
  if (request.purpose === EmailCodePurpose.SIGN_UP) {
    return {
      to: request.email,
      subject: 'Your coinvoice sign-up code',
      text: [
        'Your coinvoice sign-up code is:',
        '',
        `    ${request.code}`,
        '',
        `Enter it on the sign-up page to create your account.${expiry}`,
        '',
        'If you did not sign up for coinvoice, ignore this email: no account is created without the code.',
        '',
        '— coinvoice',
      ].join('\n'),
    };
  }
  return {
    to: request.email,
    subject: 'Confirm your email address for coinvoice',
    text: [
      'Your coinvoice email verification code is:',
      '',
      `    ${request.code}`,
      '',
      `Enter it in the dashboard to confirm this address (needed for live API keys and live payouts).${expiry}`,
      '',
      'If you did not create a coinvoice account, ignore this email.',
      '',
      '— coinvoice',
    ].join('\n'),
  };
}

/** To the owner of an account: someone tried to sign up with this email (register does not tell them it is taken). */
export function signUpAttemptEmail(request: SendSignUpAttemptEmailRequest): EmailMessage {
  return {
    to: request.email,
    subject: 'Someone tried to sign up for coinvoice with your email',
    text: [
      'Someone tried to create a coinvoice account with this email address, which already has an account.',
      'No new account was created and nothing about your account changed.',
      '',
      'If it was you: sign in with your email and password instead.',
      '',
      'If it was not you, you need not do anything.',
      '',
      '— coinvoice',
    ].join('\n'),
  };
}

export function logMailer(logger: Logger, mailer: Mailer): void {
  logger.info({ email: mailer.description }, 'notifier: emails are sent via ' + mailer.description);
}
