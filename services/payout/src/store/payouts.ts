/**
 * The `payouts` table. `amount` is numeric and comes back as a decimal string; timestamps are
 * truncated to milliseconds so the history cursor round-trips exactly through a JS Date. Every
 * state change is an UPDATE guarded by the transition table (`sourceStages`), on a row the caller
 * has locked, so even a caller that skipped the lock could not make a transition twice.
 */
import { selectKeysetPage, type Queryable, type TransactionSql } from '@coinvoice/runtime';
import { OPERATOR_QUEUE_CURSORS, PAYOUT_CURSORS, type PayoutCursor } from '../domain/requests';
import { sourceStages, statusOfStage, targetStage, type CancelReason, type PayoutStatusName, type PayoutTrigger } from '../domain/status';
import type { ProjectEnvironment } from '@coinvoice/domain/environment';

export interface PayoutRow {
  id: string;
  project_id: string;
  environment: ProjectEnvironment;
  amount: string;
  currency: string;
  /** The network it is sent on (migration 0500): its (currency, network) balance holds it. */
  network: string;
  address: string;
  note: string | null;
  status: PayoutStatusName;
  transaction_hash: string | null;
  admin_note: string | null;
  cancel_reason: CancelReason | null;
  code_hash: Buffer | null;
  code_salt: Buffer | null;
  code_expires_at: Date;
  code_attempts_left: number;
  created_at: Date;
  updated_at: Date;
  verified_at: Date | null;
  completed_at: Date | null;
  rejected_at: Date | null;
  cancelled_at: Date | null;
  /** Set when an operator (or processor) claimed the Pending payout to send it: stage Sending. */
  claimed_at: Date | null;
  /** Who claimed it: the operator's merchant id. */
  claimed_by: string | null;
  /** Who asked for it (migration 0200): the merchant, or the project's auto-sweep rule. */
  origin: 'merchant' | 'auto_sweep';
  /** An operator's Approve (docs/treasury.md): needed above PAYOUT_AUTO_MAX_<ASSET>. */
  approved_at: Date | null;
  approved_by: string | null;
  /** Confirmations of the in-flight transaction (the processor's); null when none was sent. */
  confirmations: number | null;
  /** The signer's last refusal to sign it (migration 0800), and when; cleared once it is signed. */
  signer_refusal: string | null;
  signer_refused_at: Date | null;
}

export interface NewPayoutRow {
  id: string;
  projectId: string;
  environment: ProjectEnvironment;
  /** Decimal string. */
  amount: string;
  currency: string;
  network: string;
  address: string;
  note: string | null;
  codeHash: Buffer;
  codeSalt: Buffer;
  codeTtlMs: number;
  codeAttempts: number;
}

/** Inserts an AwaitingVerification payout; created_at is the database clock, the code expires codeTtlMs later. */
export async function insertPayout(tx: TransactionSql, row: NewPayoutRow): Promise<PayoutRow> {
  const [inserted] = await tx<PayoutRow[]>`
    with clock as (select date_trunc('milliseconds', now()) as created_at)
    insert into payouts (
      id, project_id, environment, amount, currency, network, address, note, status,
      code_hash, code_salt, code_expires_at, code_attempts_left, created_at, updated_at
    )
    select
      ${row.id}, ${row.projectId}, ${row.environment}, ${row.amount}::numeric, ${row.currency}, ${row.network}, ${row.address}, ${row.note},
      'AwaitingVerification', ${row.codeHash}, ${row.codeSalt},
      clock.created_at + ${row.codeTtlMs}::int * interval '1 millisecond', ${row.codeAttempts},
      clock.created_at, clock.created_at
    from clock
    returning *`;
  if (!inserted) throw new Error('insert into payouts returned no row');
  return inserted;
}

/** One payout of a project; another project's payout is as absent as a missing one. */
export async function findPayout(sql: Queryable, projectId: string, payoutId: string): Promise<PayoutRow | undefined> {
  const [row] = await sql<PayoutRow[]>`select * from payouts where id = ${payoutId} and project_id = ${projectId}`;
  return row;
}

/** Any project's payout (operators), unlocked. */
export async function findPayoutById(sql: Queryable, payoutId: string): Promise<PayoutRow | undefined> {
  const [row] = await sql<PayoutRow[]>`select * from payouts where id = ${payoutId}`;
  return row;
}

/**
 * Locks a payout for a state change (concurrent changes queue here and each sees the previous
 * one's outcome), with the database clock. Without `projectId` (operators) any project's payout.
 */
export async function lockPayout(
  tx: TransactionSql,
  payoutId: string,
  projectId?: string,
): Promise<{ payout: PayoutRow; now: Date } | undefined> {
  const byProject = projectId === undefined ? tx`` : tx`and project_id = ${projectId}`;
  const [row] = await tx<(PayoutRow & { db_now: Date })[]>`
    select *, now() as db_now from payouts where id = ${payoutId} ${byProject} for update`;
  if (!row) return undefined;
  const { db_now: now, ...payout } = row;
  return { payout, now };
}

/** The timestamp column each target stage sets. */
const STAMP_COLUMN = {
  Pending: 'verified_at',
  Sending: 'claimed_at',
  Completed: 'completed_at',
  Rejected: 'rejected_at',
  Cancelled: 'cancelled_at',
} as const;

/** The stage of a stored row, in SQL: the one definition the guards use (domain: `stageOf`). */
const stageSql = (sql: Queryable) => sql`(case when status = 'Pending' and claimed_at is not null then 'Sending' else status end)`;

/** Extra columns a transition sets. */
export interface TransitionFields {
  transactionHash?: string;
  adminNote?: string;
  /** Who claims the payout (claim only). */
  claimedBy?: string;
}

/**
 * Moves a locked payout along the transition table: status, the trigger's timestamp, the reason of
 * a cancellation, and the code cleared once the payout leaves AwaitingVerification. Returns
 * undefined when the payout is not in a source status of `trigger` (the guard).
 */
export async function applyTransition(
  tx: TransactionSql,
  payoutId: string,
  trigger: PayoutTrigger,
  fields: TransitionFields & { cancelReason?: CancelReason } = {},
): Promise<PayoutRow | undefined> {
  const to = targetStage(trigger);
  if (to === 'AwaitingVerification') throw new Error('no transition leads back to AwaitingVerification');
  if (to === 'Sending' && !fields.claimedBy) throw new Error('a claim names who claims');
  if (trigger === 'unclaim') {
    // Back to Pending as it was before the claim: verified_at and the rest stay.
    const [row] = await tx<PayoutRow[]>`
      update payouts set claimed_by = null, claimed_at = null, transaction_hash = null, confirmations = 0, updated_at = date_trunc('milliseconds', now())
      where id = ${payoutId} and ${stageSql(tx)} = any(${sourceStages(trigger)})
      returning *`;
    return row;
  }
  const stampColumn = STAMP_COLUMN[to];
  const [row] = await tx<PayoutRow[]>`
    update payouts set
      status = ${statusOfStage(to)},
      claimed_by = ${to === 'Sending' ? fields.claimedBy! : tx`claimed_by`},
      updated_at = date_trunc('milliseconds', now()),
      ${tx(stampColumn)} = date_trunc('milliseconds', now()),
      code_hash = null,
      code_salt = null,
      cancel_reason = ${to === 'Cancelled' ? (fields.cancelReason ?? null) : null},
      transaction_hash = ${to === 'Completed' ? (fields.transactionHash ?? null) : null},
      admin_note = ${to === 'Rejected' ? (fields.adminNote ?? null) : null}
    where id = ${payoutId} and ${stageSql(tx)} = any(${sourceStages(trigger)})
    returning *`;
  return row;
}

/**
 * Records that `transactionHash` completes `payoutId`, inside the completing transaction; false when
 * the hash already completed another payout (a transaction pays one payout only). Concurrent
 * completions naming the same hash queue on its unique index: the second sees the first's commit.
 * With `outputIndex` (a UTXO batch, docs/treasury.md#utxo) the transaction's output pays the payout:
 * one transaction completes several payouts, each output once, and never also a whole-hash one.
 */
export async function recordPayoutTransaction(tx: TransactionSql, transactionHash: string, payoutId: string, outputIndex: number | null = null): Promise<boolean> {
  const otherKind = outputIndex === null ? tx`output_index is not null` : tx`output_index is null`;
  const inserted = await tx`
    insert into payout_transactions (transaction_hash, payout_id, output_index)
    select ${transactionHash}, ${payoutId}, ${outputIndex}
    where not exists (select 1 from payout_transactions where transaction_hash = ${transactionHash} and ${otherKind})
    on conflict (transaction_hash, (coalesce(output_index, -1))) do nothing
    returning 1`;
  return inserted.length === 1;
}

/**
 * The treasury's own transaction with this hash, when the processors signed one: an EVM payout,
 * sweep or gas top-up (`chain_transactions`), a Tron payout (`tron_transactions`) or a UTXO batch
 * (`utxo_transactions`, paying its payouts by output). Stored before any broadcast, so a hash an
 * operator can see on chain is here from then on; such a transfer completes only what it was signed
 * for (docs/accounting.md#completing-a-payout-by-hand). `payoutId` is null for a sweep, a top-up
 * or a batch.
 */
export async function treasuryTransactionOf(tx: TransactionSql, transactionHash: string): Promise<{ kind: string; payoutId: string | null } | undefined> {
  const [row] = await tx<{ kind: string; payout_id: string | null }[]>`
    select purpose as kind, payout_id::text from chain_transactions where transaction_hash = ${transactionHash}
    union all select 'payout', payout_id::text from tron_transactions where txid = ${transactionHash}
    union all select 'utxo batch', null from utxo_transactions where txid = ${transactionHash}
    limit 1`;
  return row && { kind: row.kind, payoutId: row.payout_id };
}

/** Counts one wrong code against a locked AwaitingVerification payout; returns the attempts left. */
export async function useAttempt(tx: TransactionSql, payoutId: string): Promise<number> {
  const [row] = await tx<{ code_attempts_left: number }[]>`
    update payouts set code_attempts_left = code_attempts_left - 1, updated_at = date_trunc('milliseconds', now())
    where id = ${payoutId} and status = 'AwaitingVerification' and code_attempts_left > 0
    returning code_attempts_left`;
  if (!row) throw new Error(`payout ${payoutId} has no attempt left to use`);
  return row.code_attempts_left;
}

/**
 * Locks up to `limit` AwaitingVerification payouts whose code has expired. Rows another
 * transaction holds (another sweeper's batch, a verification in progress) are skipped, so two
 * sweepers never cancel the same payout and a verification that holds its lock decides first.
 */
export async function lockExpiredAwaiting(tx: TransactionSql, limit: number): Promise<PayoutRow[]> {
  return tx<PayoutRow[]>`
    select * from payouts
    where ${stageSql(tx)} = any(${sourceStages('expire_code')}) and code_expires_at <= now()
    order by code_expires_at
    limit ${limit}
    for update skip locked`;
}

export interface ListQuery {
  projectId: string;
  status: PayoutStatusName | undefined;
  after: PayoutCursor | undefined;
  pageSize: number;
}

/** A project's payouts, newest first by (created_at, id), one page and the next page's cursor. */
export function listPayouts(sql: Queryable, query: ListQuery): Promise<{ rows: PayoutRow[]; nextCursor: string }> {
  const byStatus = query.status === undefined ? sql`` : sql`and status = ${query.status}`;
  return selectKeysetPage<PayoutRow>(
    sql,
    { table: 'payouts', filters: sql`and project_id = ${query.projectId} ${byStatus}`, order: 'newest_first', after: query.after, pageSize: query.pageSize },
    PAYOUT_CURSORS,
  );
}

/** Transaction-level lock on a project's payout requests (advisory, keyed by the project id). */
export async function lockProjectPayouts(tx: TransactionSql, projectId: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${'payout-requests:' + projectId.toLowerCase()}, 0))`;
}

/** How many of the project's payouts await verification now. */
export async function countOpenUnverified(tx: TransactionSql, projectId: string): Promise<number> {
  const [row] = await tx<{ n: number }[]>`
    select count(*)::int as n from payouts where project_id = ${projectId} and status = 'AwaitingVerification'`;
  return row?.n ?? 0;
}

export interface OperatorQuery {
  status: PayoutStatusName | undefined;
  environment: ProjectEnvironment | undefined;
  after: PayoutCursor | undefined;
  pageSize: number;
}

/** Every project's payouts, oldest first by (created_at, id): the operators' work queue, one page. */
export function listAllPayouts(sql: Queryable, query: OperatorQuery): Promise<{ rows: PayoutRow[]; nextCursor: string }> {
  const byStatus = query.status === undefined ? sql`` : sql`and status = ${query.status}`;
  const byEnvironment = query.environment === undefined ? sql`` : sql`and environment = ${query.environment}`;
  return selectKeysetPage<PayoutRow>(
    sql,
    { table: 'payouts', filters: sql`${byStatus} ${byEnvironment}`, order: 'oldest_first', after: query.after, pageSize: query.pageSize },
    OPERATOR_QUEUE_CURSORS,
  );
}

/**
 * Records an operator's Approve on a locked payout: only a live, verified, Pending payout nobody
 * has claimed yet. Undefined when the guard refuses it.
 */
export async function approvePayout(tx: TransactionSql, payoutId: string, operatorId: string): Promise<PayoutRow | undefined> {
  const [row] = await tx<PayoutRow[]>`
    update payouts set approved_at = date_trunc('milliseconds', now()), approved_by = ${operatorId}, updated_at = date_trunc('milliseconds', now())
    where id = ${payoutId} and status = 'Pending' and claimed_at is null and approved_at is null and environment = 'live'
    returning *`;
  return row;
}
