/**
 * Where a test system's email arrives, so test fixtures can read the sign-up code as a person
 * reads their email (issue 27: an account exists only once the emailed code confirmed it). A
 * system booted by bootSystem writes its email to its mailbox folder unless the test gives it an
 * SMTP server of its own (SMTP_URL, and `mail` to bootSystem); each gateway of the system is
 * remembered with that mailbox, so `registerMerchant(api)` needs nothing but the gateway client.
 */
import { readMailbox } from '../../deploy/local/src/mailbox';

export interface Mailbox {
  /** Every raw RFC 5322 message received so far, oldest first. */
  messages(): readonly string[];
}

/** The notifier's development mailbox folder (MAILBOX_DIR): one .eml file per email. */
export function mailboxFolder(dir: string): Mailbox {
  return { messages: () => readMailbox(dir) };
}

/** A test's own SMTP server (services/notifier/test/support/smtp.ts SmtpInbox). */
export function smtpMailbox(inbox: { messages: readonly { raw: string }[] }): Mailbox {
  return { messages: () => inbox.messages.map((m) => m.raw) };
}

const mailboxByGateway = new Map<string, Mailbox>();

/** Remembers where the email of the system behind `gatewayUrl` arrives. */
export function rememberMailbox(gatewayUrl: string, mailbox: Mailbox): void {
  mailboxByGateway.set(gatewayUrl.replace(/\/+$/, ''), mailbox);
}

/** Where the email of the system behind `gatewayUrl` arrives. */
export function mailboxOf(gatewayUrl: string): Mailbox {
  const mailbox = mailboxByGateway.get(gatewayUrl.replace(/\/+$/, ''));
  if (!mailbox) throw new Error(`no mailbox is known for the gateway ${gatewayUrl}: boot it with bootSystem (or rememberMailbox)`);
  return mailbox;
}
