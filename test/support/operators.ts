/**
 * How a test account becomes an operator: the ONE place that knows the mechanism. Operators are
 * granted by `node services/auth/dist/main.js grant-operator <email>` (issue 12), as in
 * production: `grantOperator` registers the account, runs the command against the system's
 * database, logs in again (the grant ended the account's sessions; the new token carries the
 * admin claim) and proves the grant took. Nothing is needed at boot any more.
 */
import { authCommand } from './accounts';
import { bearer, registerMerchant, type GatewayClient, type MerchantFixture } from './http';
import type { BootedSystem } from './system';

/** Kept for callers written before issue 12: operators no longer need anything at boot. */
export function operatorBootEnv(_email: string): NodeJS.ProcessEnv {
  return {};
}

export async function grantOperator(
  system: Pick<BootedSystem, 'database'>,
  api: GatewayClient,
  email: string,
  password: string,
): Promise<MerchantFixture> {
  // Operators need a verified email (grant-operator refuses others): signing up verified it.
  const registered = await registerMerchant(api, { email, password, name: 'coinvoice operations' });
  await authCommand(system, 'grant-operator', email);
  const login = await api.post('/api/merchant/login', { email, password });
  if (login.status !== 200) throw new Error(`operator login failed: ${login.status} ${login.text}`);
  const me = await api.get('/api/merchant/me', { headers: bearer(login.body.token) });
  if (me.body?.isAdmin !== true) throw new Error(`${email} is not an operator after grant-operator`);
  return { ...registered, token: login.body.token };
}
