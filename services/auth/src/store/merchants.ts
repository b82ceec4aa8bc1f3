/** Merchant accounts. Emails arrive normalised (domain `normaliseEmail`); the table refuses others. */
import type { Queryable } from '@coinvoice/runtime';
import type { MerchantCredentialsRow, MerchantRow } from './rows';

export interface NewMerchant {
  email: string;
  name: string;
  passwordHash: string;
}

export class MerchantStore {
  constructor(private readonly sql: Queryable) {}

  /** The new merchant, or undefined when the email is already registered. */
  async create(merchant: NewMerchant): Promise<MerchantRow | undefined> {
    const [row] = await this.sql<MerchantRow[]>`
      insert into merchants (email, name, password_hash)
      values (${merchant.email}, ${merchant.name}, ${merchant.passwordHash})
      on conflict (email) do nothing
      returning id, email, name, created_at`;
    return row;
  }

  async findById(id: string): Promise<MerchantRow | undefined> {
    const [row] = await this.sql<MerchantRow[]>`
      select id, email, name, created_at from merchants where id = ${id}`;
    return row;
  }

  /** With the password hash, for Login only. */
  async findCredentialsByEmail(email: string): Promise<MerchantCredentialsRow | undefined> {
    const [row] = await this.sql<MerchantCredentialsRow[]>`
      select id, email, name, created_at, password_hash from merchants where email = ${email}`;
    return row;
  }

  /** Replaces a hash made with older parameters (after a successful login). */
  async replacePasswordHash(id: string, previousHash: string, newHash: string): Promise<void> {
    // Only if nobody changed it meanwhile: a concurrent login re-hashing too is harmless, but a
    // password change (future) must not be overwritten by a stale re-hash.
    await this.sql`
      update merchants set password_hash = ${newHash} where id = ${id} and password_hash = ${previousHash}`;
  }
}
