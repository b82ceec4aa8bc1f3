/** What a statement reads, counted with the transaction's own statistics (the store-plans tests). */
import type { TransactionSql } from '@coinvoice/runtime';

/**
 * Rows of `table` this transaction has read so far: by sequential scans, and index entries read
 * through any of its indexes (a bitmap scan of the wrong index reads its entries without
 * fetching their rows).
 */
export async function rowsTouched(tx: TransactionSql, table: string): Promise<number> {
  const [row] = await tx<{ n: string }[]>`
    select coalesce((select seq_tup_read from pg_stat_xact_user_tables where schemaname = current_schema() and relname = ${table}), 0)
         + coalesce((select sum(pg_stat_get_xact_tuples_returned(indexrelid)) from pg_index where indrelid = ${table}::regclass), 0) as n`;
  return Number(row?.n ?? 0);
}

/**
 * Index scans of `table` this transaction has started so far, on any of its indexes: a correlated
 * subquery probed once per outer row counts each probe, even those that find nothing.
 */
export async function indexScansStarted(tx: TransactionSql, table: string): Promise<number> {
  const [row] = await tx<{ n: string }[]>`
    select coalesce(sum(pg_stat_get_xact_numscans(indexrelid)), 0) as n from pg_index where indrelid = ${table}::regclass`;
  return Number(row?.n ?? 0);
}
