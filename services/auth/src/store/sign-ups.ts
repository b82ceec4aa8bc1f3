/**
 * Pending sign-ups (issue 27): an email, the chosen name and password hash, and the hash of the
 * code emailed to prove the address. The account is created from the row when the code is confirmed.
 */
import type { Queryable } from '@coinvoice/runtime';

export interface NewPendingSignUp {
  email: string;
  name: string;
  passwordHash: string;
  codeHash: Buffer;
  codeSalt: Buffer;
  ttlMs: number;
  attempts: number;
}

export interface PendingSignUpRow {
  email: string;
  name: string;
  password_hash: string;
  code_hash: Buffer | null;
  code_salt: Buffer | null;
  code_expires_at: Date;
  attempts_left: number;
}

/** Pending sign-ups this long past their code's expiry are removed (they are of no use to anyone). */
const PURGE_AFTER_EXPIRY = '1 day';

export class SignUpStore {
  constructor(private readonly sql: Queryable) {}

  /**
   * Stores (or replaces: the older code stops working) the email's pending sign-up, in one
   * statement whether or not an account holds the email, so both cost the same; says which it was.
   */
  async start(signUp: NewPendingSignUp): Promise<{ codeExpiresAt: Date; accountExists: boolean }> {
    // Long-expired rows of other emails go in passing; this email's row is replaced below.
    await this.sql`
      delete from pending_sign_ups
      where code_expires_at < now() - ${PURGE_AFTER_EXPIRY}::interval and email <> ${signUp.email}`;
    const [row] = await this.sql<{ code_expires_at: Date; account_exists: boolean }[]>`
      insert into pending_sign_ups (email, name, password_hash, code_hash, code_salt, code_expires_at, attempts_left)
      values (${signUp.email}, ${signUp.name}, ${signUp.passwordHash}, ${signUp.codeHash}, ${signUp.codeSalt},
        now() + make_interval(secs => ${signUp.ttlMs / 1000}), ${signUp.attempts})
      on conflict (email) do update set
        name = excluded.name, password_hash = excluded.password_hash, code_hash = excluded.code_hash,
        code_salt = excluded.code_salt, code_expires_at = excluded.code_expires_at,
        attempts_left = excluded.attempts_left, created_at = now()
      returning code_expires_at, exists (select 1 from merchants where email = ${signUp.email}) as account_exists`;
    if (!row) throw new Error('storing a pending sign-up returned no row');
    return { codeExpiresAt: row.code_expires_at, accountExists: row.account_exists };
  }

  /** The email's pending sign-up, locked for the check (a concurrent confirmation waits), with the database's now. */
  async lock(tx: Queryable, email: string): Promise<(PendingSignUpRow & { now: Date }) | undefined> {
    const [row] = await tx<(PendingSignUpRow & { now: Date })[]>`
      select email, name, password_hash, code_hash, code_salt, code_expires_at, attempts_left, now() as now
      from pending_sign_ups where email = ${email} for update`;
    return row;
  }

  /** Uses one attempt; clears the code when none is left. */
  async useAttempt(tx: Queryable, email: string): Promise<void> {
    await tx`
      update pending_sign_ups set attempts_left = greatest(attempts_left - 1, 0),
        code_hash = case when attempts_left <= 1 then null else code_hash end,
        code_salt = case when attempts_left <= 1 then null else code_salt end
      where email = ${email}`;
  }

  /** Removes the pending sign-up once its account exists. */
  async remove(tx: Queryable, email: string): Promise<void> {
    await tx`delete from pending_sign_ups where email = ${email}`;
  }
}
