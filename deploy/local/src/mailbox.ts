/**
 * Reading what the notifier sent, for tools that sign accounts up on a system they started (the
 * benchmark, the tests): without SMTP_URL the notifier writes each email as an .eml file to its
 * mailbox folder (MAILBOX_DIR). The sign-up code is the only way to an account (issue 27), so these
 * tools read it from there as a person reads their email.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** The raw RFC 5322 messages in a mailbox folder, oldest first (file names start with the time written). */
export function readMailbox(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.eml'))
    .sort()
    .map((f) => readFileSync(path.join(dir, f), 'utf8'));
}

/** The text body of a raw message (quoted-printable soft breaks undone); enough for our plain-text emails. */
export function mailText(raw: string): string {
  const split = raw.indexOf('\n\n') >= 0 ? raw.indexOf('\n\n') : raw.indexOf('\r\n\r\n');
  const body = raw.slice(split).replace(/\r\n/g, '\n');
  return body.replace(/=\n/g, '').replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/** A header's value from a raw message (unfolded). */
export function mailHeader(raw: string, name: string): string | undefined {
  const head = raw.split(/\r?\n\r?\n/)[0]?.replace(/\r?\n[ \t]+/g, ' ') ?? '';
  const line = head.split(/\r?\n/).find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}

/** The 6-digit code in an email's text (it stands alone on an indented line). */
export function codeInMail(text: string): string | undefined {
  return /^\s+(\d{6})\s*$/m.exec(text)?.[1];
}

/** The sign-up codes sent to `email` among `messages`, oldest first (the notifier's sign-up email). */
export function signUpCodesIn(messages: readonly string[], email: string): string[] {
  const codes: string[] = [];
  for (const raw of messages) {
    if (!mailHeader(raw, 'To')?.toLowerCase().includes(email.toLowerCase())) continue;
    const text = mailText(raw);
    if (!text.includes('sign-up code')) continue;
    const code = codeInMail(text);
    if (code) codes.push(code);
  }
  return codes;
}

/**
 * Waits for a sign-up code sent to `email` beyond the `known` ones seen before registering (a
 * repeated registration sends a new code; the newest is the one that works).
 */
export async function awaitSignUpCode(messages: () => readonly string[], email: string, known = 0, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const codes = signUpCodesIn(messages(), email);
    if (codes.length > known) return codes.at(-1)!;
    if (Date.now() > deadline) throw new Error(`no sign-up code for ${email} arrived within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
