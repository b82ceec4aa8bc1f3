/**
 * A merchant account for a benchmark run, made as a person makes one (issue 27): register, read
 * the code the notifier wrote to the mailbox folder (the bench starts the system without SMTP_URL,
 * with MAILBOX_DIR of its own), confirm. Returns the session token.
 */
import { awaitSignUpCode, readMailbox, signUpCodesIn } from '@coinvoice/local';

export async function signUp(gatewayUrl: string, mailboxDir: string, account: { email: string; password: string; name: string }): Promise<string> {
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${gatewayUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const known = signUpCodesIn(readMailbox(mailboxDir), account.email).length;
  const started = await post('/api/merchant/register', account);
  if (started.status !== 202) throw new Error(`register answered ${started.status}: ${JSON.stringify(started.body)}`);
  const code = await awaitSignUpCode(() => readMailbox(mailboxDir), account.email, known);
  const confirmed = await post('/api/merchant/register/confirm', { email: account.email, code, password: account.password });
  if (confirmed.status !== 201 || typeof confirmed.body.token !== 'string') throw new Error(`register confirm answered ${confirmed.status}: ${JSON.stringify(confirmed.body)}`);
  return confirmed.body.token;
}
