/** Merchant accounts. Emails arrive normalised (domain `normaliseEmail`); the table refuses others. */
import type { Queryable } from '@coinvoice/runtime';
import type { EmailCodeRow, MerchantCredentialsRow, MerchantRow } from './rows';

export interface NewMerchant {
  email: string;
  name: string;
  passwordHash: string;
  /** The address is proven already (sign-up confirmed by the emailed code). */
  emailVerified?: boolean;
}

export interface NewEmailCode {
  hash: Buffer;
  salt: Buffer;
  ttlMs: number;
  attempts: number;
}

const MERCHANT = 'id, email, name, created_at, is_operator, email_verified_at, session_epoch';

export class MerchantStore {
  constructor(private readonly sql: Queryable) {}

  /** The new merchant, or undefined when the email is already registered. */
  async create(merchant: NewMerchant, tx: Queryable = this.sql): Promise<MerchantRow | undefined> {
    const [row] = await tx<MerchantRow[]>`
      insert into merchants (email, name, password_hash, email_verified_at)
      values (${merchant.email}, ${merchant.name}, ${merchant.passwordHash}, case when ${merchant.emailVerified === true} then now() end)
      on conflict (email) do nothing
      returning ${tx.unsafe(MERCHANT)}`;
    return row;
  }

  async findById(id: string, tx: Queryable = this.sql): Promise<MerchantRow | undefined> {
    const [row] = await tx<MerchantRow[]>`select ${tx.unsafe(MERCHANT)} from merchants where id = ${id}`;
    return row;
  }

  async findByEmail(email: string, tx: Queryable = this.sql): Promise<MerchantRow | undefined> {
    const [row] = await tx<MerchantRow[]>`select ${tx.unsafe(MERCHANT)} from merchants where email = ${email}`;
    return row;
  }

  /** With the password hash, for Login only. */
  async findCredentialsByEmail(email: string): Promise<MerchantCredentialsRow | undefined> {
    const [row] = await this.sql<MerchantCredentialsRow[]>`
      select ${this.sql.unsafe(MERCHANT)}, password_hash from merchants where email = ${email}`;
    return row;
  }

  /** With the password hash, for ChangePassword only. */
  async findCredentialsById(id: string): Promise<MerchantCredentialsRow | undefined> {
    const [row] = await this.sql<MerchantCredentialsRow[]>`
      select ${this.sql.unsafe(MERCHANT)}, password_hash from merchants where id = ${id}`;
    return row;
  }

  /** Replaces a hash made with older parameters (after a successful login). */
  async replacePasswordHash(id: string, previousHash: string, newHash: string, tx: Queryable = this.sql): Promise<boolean> {
    // Only if nobody changed it meanwhile: a stale re-hash must not overwrite a password change.
    const rows = await tx`
      update merchants set password_hash = ${newHash} where id = ${id} and password_hash = ${previousHash} returning id`;
    return rows.length === 1;
  }

  /** Raises the session epoch (every older token is revoked); the new epoch. */
  async revokeSessions(tx: Queryable, id: string): Promise<number | undefined> {
    const [row] = await tx<{ session_epoch: number }[]>`
      update merchants set session_epoch = session_epoch + 1, sessions_revoked_at = now()
      where id = ${id} returning session_epoch`;
    return row?.session_epoch;
  }

  /** Merchants whose sessions were revoked within `withinSeconds` (older revocations have expired tokens only). */
  async listSessionRevocations(withinSeconds: number): Promise<{ id: string; session_epoch: number }[]> {
    return this.sql<{ id: string; session_epoch: number }[]>`
      select id, session_epoch from merchants
      where sessions_revoked_at is not null and sessions_revoked_at >= now() - make_interval(secs => ${withinSeconds})`;
  }

  async setOperator(tx: Queryable, id: string, operator: boolean): Promise<void> {
    await tx`update merchants set is_operator = ${operator} where id = ${id}`;
  }

  async recordOperatorChange(tx: Queryable, change: { merchantId: string; email: string; action: 'grant' | 'revoke'; actor: string }): Promise<void> {
    await tx`
      insert into operator_audit (merchant_id, email, action, actor)
      values (${change.merchantId}, ${change.email}, ${change.action}, ${change.actor})`;
  }

  /** Replaces the pending email code (an older one stops working). */
  async setEmailCode(id: string, code: NewEmailCode): Promise<void> {
    await this.sql`
      update merchants set email_code_hash = ${code.hash}, email_code_salt = ${code.salt},
        email_code_expires_at = now() + make_interval(secs => ${code.ttlMs / 1000}),
        email_code_attempts_left = ${code.attempts}
      where id = ${id}`;
  }

  /** The merchant's code state, locked for the check. */
  async lockEmailCode(tx: Queryable, id: string): Promise<(EmailCodeRow & { now: Date }) | undefined> {
    const [row] = await tx<(EmailCodeRow & { now: Date })[]>`
      select id, email_verified_at, email_code_hash, email_code_salt, email_code_expires_at, email_code_attempts_left, now() as now
      from merchants where id = ${id} for update`;
    return row;
  }

  /** Uses one attempt; clears the code when none is left. The attempts left. */
  async useEmailCodeAttempt(tx: Queryable, id: string): Promise<number> {
    const [row] = await tx<{ left: number }[]>`
      update merchants set email_code_attempts_left = greatest(email_code_attempts_left - 1, 0),
        email_code_hash = case when email_code_attempts_left <= 1 then null else email_code_hash end,
        email_code_salt = case when email_code_attempts_left <= 1 then null else email_code_salt end
      where id = ${id} returning email_code_attempts_left as left`;
    return row?.left ?? 0;
  }

  async markEmailVerified(tx: Queryable, id: string): Promise<MerchantRow | undefined> {
    const [row] = await tx<MerchantRow[]>`
      update merchants set email_verified_at = coalesce(email_verified_at, now()),
        email_code_hash = null, email_code_salt = null, email_code_expires_at = null, email_code_attempts_left = 0
      where id = ${id} returning ${tx.unsafe(MERCHANT)}`;
    return row;
  }
}
