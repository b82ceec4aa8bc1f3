/**
 * One active replica of a role (the invoice service's watcher, the payout processor): a Postgres
 * session advisory lock held on a reserved connection (docs/architecture.md#watcher-roles). The
 * others stand by and try again; when the holder dies its connection closes, the lock with it,
 * and a standby takes over at its next try.
 */
import type { Sql } from './db';

type ReservedSql = Awaited<ReturnType<Sql['reserve']>>;

/** The lock's key: `name` hashed to 32 bits (a fixed name per role keeps its replicas agreeing). */
export function advisoryLockKey(name: string): number {
  let hash = 0;
  for (const char of name) hash = (hash * 31 + char.charCodeAt(0)) | 0;
  return hash;
}

export class AdvisoryLockHolder {
  private connection: ReservedSql | undefined;

  constructor(
    private readonly sql: Sql,
    /** Hashed into the lock's key (advisoryLockKey). */
    readonly name: string,
  ) {}

  /** Whether this replica holds the lock (as of the last hold()). */
  get held(): boolean {
    return this.connection !== undefined;
  }

  /**
   * Re-checks the connection holding the lock ('held'), or tries to take it ('taken'; 'busy' when
   * another replica holds it). A failed connection throws, after letting the lock go.
   */
  async hold(): Promise<'held' | 'taken' | 'busy'> {
    try {
      if (this.connection) {
        await this.connection`select 1`;
        return 'held';
      }
      const connection = await this.sql.reserve();
      const [row] = await connection<{ locked: boolean }[]>`select pg_try_advisory_lock(${advisoryLockKey(this.name)}) as locked`;
      if (!row?.locked) {
        connection.release();
        return 'busy';
      }
      this.connection = connection;
      return 'taken';
    } catch (err) {
      await this.release();
      throw err;
    }
  }

  /** Lets the lock go (and the reserved connection back to the pool); a dead connection took it already. */
  async release(): Promise<void> {
    const connection = this.connection;
    this.connection = undefined;
    if (!connection) return;
    try {
      await connection`select pg_advisory_unlock_all()`;
    } catch {
      // The connection is gone: so is the lock.
    }
    connection.release();
  }
}
