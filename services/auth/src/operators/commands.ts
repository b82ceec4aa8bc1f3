/**
 * Operator rights are granted and revoked only by a command run inside the deployment (a
 * Kubernetes Job or `kubectl exec`), never by matching an email at registration:
 *
 *   node services/auth/dist/main.js grant-operator <email>
 *   node services/auth/dist/main.js revoke-operator <email>
 *
 * The merchant must have registered and verified the email address first (an operator acts on
 * other merchants' money: the account must be provably the address's owner). Each change is
 * written to operator_audit with who ran it, and ends the merchant's sessions (a revoked operator's token stops working at once; a new
 * operator logs in again to get the admin claim).
 */
import { eventTransaction, type Logger, type Sql } from '@coinvoice/runtime';
import { checkEmail } from '../domain/validation';
import { revokeSessions } from '../handlers';
import { MerchantStore } from '../store/merchants';

export type OperatorAction = 'grant' | 'revoke';

export const OPERATOR_COMMANDS: Record<string, OperatorAction> = {
  'grant-operator': 'grant',
  'revoke-operator': 'revoke',
};

export type OperatorChange =
  | { ok: true; merchantId: string; changed: boolean }
  | { ok: false; reason: string };

/** Grants or revokes operator rights of the merchant with `rawEmail`, audit-logged, in one transaction. */
export async function changeOperator(
  sql: Sql,
  input: { action: OperatorAction; email: string; actor: string },
  logger: Logger,
): Promise<OperatorChange> {
  const email = checkEmail(input.email);
  if (!email.ok) return { ok: false, reason: `"${input.email}" ${email.message}` };
  const merchants = new MerchantStore(sql);
  const outcome = await eventTransaction(sql, async (tx): Promise<OperatorChange> => {
    const merchant = await merchants.findByEmail(email.value, tx);
    if (!merchant) return { ok: false, reason: `no merchant is registered with ${email.value}; register the account first` };
    const operator = input.action === 'grant';
    if (operator && merchant.email_verified_at === null) {
      return { ok: false, reason: `${email.value} has not verified its email address; the merchant verifies it first (the emailed code, POST /api/merchant/email/verify)` };
    }
    await merchants.setOperator(tx, merchant.id, operator);
    await merchants.recordOperatorChange(tx, { merchantId: merchant.id, email: email.value, action: input.action, actor: input.actor });
    await revokeSessions(tx, merchants, merchant.id);
    return { ok: true, merchantId: merchant.id, changed: merchant.is_operator !== operator };
  });
  if (outcome.ok) logger.info({ merchantId: outcome.merchantId, action: input.action, actor: input.actor }, `operator ${input.action}ed`);
  else logger.warn({ action: input.action, actor: input.actor, reason: outcome.reason }, `operator ${input.action} refused`);
  return outcome;
}
