/**
 * `auto_sweep_settings` (active rules) and `auto_sweep_changes` (a change awaiting its emailed
 * code), migration 0300; and the insert of the payout a sweep creates.
 */
import type { Queryable, TransactionSql } from '@coinvoice/runtime';
import type { ProjectEnvironment } from '@coinvoice/domain/environment';
import type { AutoSweepRule } from '../domain/auto-sweep';
import type { PayoutRow } from './payouts';

export interface AutoSweepChangeRow {
  project_id: string;
  id: string;
  environment: ProjectEnvironment;
  entries: AutoSweepRule[];
  code_hash: Buffer;
  code_salt: Buffer;
  code_expires_at: Date;
  code_attempts_left: number;
  created_at: Date;
}

/** The project's active rules, by currency and network. */
export async function activeRules(sql: Queryable, projectId: string): Promise<AutoSweepRule[]> {
  return sql<AutoSweepRule[]>`
    select currency, network, address, threshold::text as threshold from auto_sweep_settings where project_id = ${projectId} order by currency, network`;
}

/** The pending change, if any (whatever its expiry: the caller decides). */
export async function pendingChange(sql: Queryable, projectId: string, options: { lock?: boolean } = {}): Promise<AutoSweepChangeRow | undefined> {
  const lock = options.lock ? sql`for update` : sql``;
  const [row] = await sql<AutoSweepChangeRow[]>`select * from auto_sweep_changes where project_id = ${projectId} ${lock}`;
  return row;
}

/** Serialises a project's configuration changes (advisory, keyed by the project id). */
export async function lockAutoSweep(tx: TransactionSql, projectId: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${'auto-sweep:' + projectId.toLowerCase()}, 0))`;
}

export async function removeRules(tx: TransactionSql, projectId: string, rules: readonly { currency: string; network: string }[]): Promise<void> {
  for (const rule of rules) {
    await tx`delete from auto_sweep_settings where project_id = ${projectId} and currency = ${rule.currency} and network = ${rule.network}`;
  }
}

/** Inserts or replaces rules (an activation by code, or a new threshold for the same destination). */
export async function upsertRules(tx: TransactionSql, projectId: string, environment: ProjectEnvironment, rules: readonly AutoSweepRule[]): Promise<void> {
  for (const rule of rules) {
    await tx`
      insert into auto_sweep_settings (project_id, environment, currency, network, address, threshold, house_checked_at)
      values (${projectId}, ${environment}, ${rule.currency}, ${rule.network}, ${rule.address}, ${rule.threshold}::numeric, now())
      on conflict (project_id, currency, network) do update set
        address = excluded.address, threshold = excluded.threshold, environment = excluded.environment,
        -- A new threshold for the same destination keeps its check (or its lack of one: the check comes).
        house_checked_at = case when auto_sweep_settings.address = excluded.address then auto_sweep_settings.house_checked_at else excluded.house_checked_at end,
        activated_at = case when auto_sweep_settings.address = excluded.address then auto_sweep_settings.activated_at else now() end,
        updated_at = now()`;
  }
}

export async function replaceChange(
  tx: TransactionSql,
  change: { projectId: string; id: string; environment: ProjectEnvironment; entries: AutoSweepRule[]; codeHash: Buffer; codeSalt: Buffer; codeTtlMs: number; attempts: number },
): Promise<AutoSweepChangeRow> {
  const [row] = await tx<AutoSweepChangeRow[]>`
    insert into auto_sweep_changes (project_id, id, environment, entries, code_hash, code_salt, code_expires_at, code_attempts_left)
    values (${change.projectId}, ${change.id}, ${change.environment}, ${tx.json(change.entries as never)}, ${change.codeHash}, ${change.codeSalt},
            now() + ${change.codeTtlMs}::int * interval '1 millisecond', ${change.attempts})
    on conflict (project_id) do update set
      id = excluded.id, environment = excluded.environment, entries = excluded.entries, code_hash = excluded.code_hash,
      code_salt = excluded.code_salt, code_expires_at = excluded.code_expires_at,
      code_attempts_left = excluded.code_attempts_left, created_at = now()
    returning *`;
  if (!row) throw new Error('insert into auto_sweep_changes returned no row');
  return row;
}

export async function deleteChange(tx: TransactionSql, projectId: string): Promise<void> {
  await tx`delete from auto_sweep_changes where project_id = ${projectId}`;
}

/** Counts one wrong code; returns the attempts left. */
export async function useChangeAttempt(tx: TransactionSql, projectId: string): Promise<number> {
  const [row] = await tx<{ code_attempts_left: number }[]>`
    update auto_sweep_changes set code_attempts_left = code_attempts_left - 1
    where project_id = ${projectId} and code_attempts_left > 0
    returning code_attempts_left`;
  if (!row) throw new Error(`auto-sweep change of project ${projectId} has no attempt left to use`);
  return row.code_attempts_left;
}

/**
 * The rule of a live balance's (currency, network), if the project has one whose destination has
 * been checked against coinvoice's own addresses (a rule stored before that check waits for it).
 */
export async function liveRule(tx: TransactionSql, projectId: string, currency: string, network: string): Promise<AutoSweepRule | undefined> {
  const [row] = await tx<AutoSweepRule[]>`
    select currency, network, address, threshold::text as threshold from auto_sweep_settings
    where project_id = ${projectId} and currency = ${currency} and network = ${network} and environment = 'live'
      and house_checked_at is not null`;
  return row;
}

export interface UncheckedRule extends AutoSweepRule {
  projectId: string;
  environment: ProjectEnvironment;
}

/** Rules whose destination was never checked against coinvoice's own addresses (stored before the check). */
export function uncheckedRules(sql: Queryable, limit: number): Promise<UncheckedRule[]> {
  return sql<UncheckedRule[]>`
    select project_id::text as "projectId", environment, currency, network, address, threshold::text as threshold
    from auto_sweep_settings where house_checked_at is null order by project_id, currency, network limit ${limit}`;
}

/** Marks `rule` checked; false when it changed meanwhile (set again: checked then). */
export async function markRuleChecked(tx: TransactionSql, rule: UncheckedRule): Promise<boolean> {
  const rows = await tx`
    update auto_sweep_settings set house_checked_at = now()
    where project_id = ${rule.projectId} and currency = ${rule.currency} and network = ${rule.network}
      and address = ${rule.address} and house_checked_at is null`;
  return rows.count === 1;
}

/** Removes `rule` as it was read (a rule set again meanwhile stays); true when it was removed. */
export async function removeUncheckedRule(tx: TransactionSql, rule: UncheckedRule): Promise<boolean> {
  const rows = await tx`
    delete from auto_sweep_settings
    where project_id = ${rule.projectId} and currency = ${rule.currency} and network = ${rule.network}
      and address = ${rule.address} and house_checked_at is null`;
  return rows.count === 1;
}

/**
 * The payout a sweep creates: already verified (status Pending, verified_at now), origin
 * auto_sweep, no code (it was confirmed when the destination was set).
 */
export async function insertSweepPayout(
  tx: TransactionSql,
  row: { id: string; projectId: string; amount: string; currency: string; network: string; address: string; note: string },
): Promise<PayoutRow> {
  const [inserted] = await tx<PayoutRow[]>`
    with clock as (select date_trunc('milliseconds', now()) as at)
    insert into payouts (
      id, project_id, environment, amount, currency, network, address, note, status, origin,
      code_expires_at, code_attempts_left, created_at, updated_at, verified_at
    )
    select ${row.id}, ${row.projectId}, 'live', ${row.amount}::numeric, ${row.currency}, ${row.network}, ${row.address}, ${row.note}, 'Pending', 'auto_sweep',
           clock.at, 0, clock.at, clock.at, clock.at
    from clock
    returning *`;
  if (!inserted) throw new Error('insert into payouts returned no row');
  return inserted;
}
