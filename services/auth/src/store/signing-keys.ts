/**
 * The JWT signing keys. At most one key is active (not retired; a partial unique index enforces
 * it). Creating the first key and rotating take a transaction-level advisory lock, so replicas
 * starting together or operators rotating twice at once never race each other.
 */
import type { SecretBox } from '@coinvoice/domain/secrets-at-rest';
import type { Sql, TransactionSql } from '@coinvoice/runtime';
import type { SigningKeyRow } from './rows';
import { openStored, signingKeyContext } from './secrets';

/** Advisory lock (single bigint key space) serialising changes to the key set: "cvsignkey". */
const SIGNING_KEYS_LOCK = 0x6376_7369_676e_6bn;

export interface NewSigningKey {
  kid: string;
  privateKeyPem: string;
}

/** A row as stored: the private key sealed (or plaintext from before encryption, kek id null). */
interface StoredKeyRow extends SigningKeyRow {
  private_key_kek_id: string | null;
}

/** Private keys are sealed with `box` (SECRETS_KEK) on insert and opened on read: rows returned hold the PEM. */
export class SigningKeyStore {
  constructor(
    private readonly sql: Sql,
    private readonly box: SecretBox,
  ) {}

  private opened(row: StoredKeyRow): SigningKeyRow {
    const { private_key_kek_id: kekId, ...rest } = row;
    return { ...rest, private_key_pem: openStored(this.box, row.private_key_pem, kekId, signingKeyContext(row.kid)) };
  }

  /** The active key, creating `generate()` first when there is none (first start). */
  async ensureActive(generate: () => NewSigningKey): Promise<SigningKeyRow> {
    return this.sql.begin(async (tx) => {
      await lockKeySet(tx);
      const active = await activeKey(tx);
      if (active) return this.opened(active);
      return this.opened(await insertKey(tx, generate(), this.box));
    });
  }

  async findActive(): Promise<SigningKeyRow | undefined> {
    const row = await activeKey(this.sql);
    return row && this.opened(row);
  }

  /**
   * Makes `next` the active key and retires the present one. Keys retired longer ago than
   * `retentionSeconds` (their last token has expired) are deleted: no private key lives longer
   * than it must.
   */
  async rotate(next: NewSigningKey, retentionSeconds: number): Promise<SigningKeyRow> {
    return this.sql.begin(async (tx) => {
      await lockKeySet(tx);
      await tx`update signing_keys set retired_at = now() where retired_at is null`;
      await tx`
        delete from signing_keys
        where retired_at is not null and retired_at < now() - make_interval(secs => ${retentionSeconds})`;
      return this.opened(await insertKey(tx, next, this.box));
    });
  }

  /**
   * Every key whose tokens may still be valid: the active key first, then keys retired less than
   * `retentionSeconds` ago, most recently retired first.
   */
  async listLive(retentionSeconds: number): Promise<SigningKeyRow[]> {
    const rows = await this.sql<StoredKeyRow[]>`
      select kid, private_key_pem, private_key_kek_id, created_at, retired_at
      from signing_keys
      where retired_at is null or retired_at >= now() - make_interval(secs => ${retentionSeconds})
      order by retired_at desc nulls first, created_at desc`;
    return rows.map((row) => this.opened(row));
  }
}

async function lockKeySet(tx: TransactionSql): Promise<void> {
  await tx`select pg_advisory_xact_lock(${SIGNING_KEYS_LOCK.toString()}::bigint)`;
}

async function activeKey(sql: Sql | TransactionSql): Promise<StoredKeyRow | undefined> {
  const [row] = await sql<StoredKeyRow[]>`
    select kid, private_key_pem, private_key_kek_id, created_at, retired_at
    from signing_keys where retired_at is null
    order by created_at desc limit 1`;
  return row;
}

async function insertKey(tx: TransactionSql, key: NewSigningKey, box: SecretBox): Promise<StoredKeyRow> {
  const sealed = box.encrypt(key.privateKeyPem, signingKeyContext(key.kid));
  const [row] = await tx<StoredKeyRow[]>`
    insert into signing_keys (kid, private_key_pem, private_key_kek_id) values (${key.kid}, ${sealed}, ${box.current.id})
    returning kid, private_key_pem, private_key_kek_id, created_at, retired_at`;
  if (!row) throw new Error('insert into signing_keys returned no row');
  return row;
}
