/**
 * `BENCH_PG_STATEMENTS=<file>`: where Postgres' time went during `npm run bench`'s pay phase, and
 * while its webhooks drained, statement by statement (pg_stat_statements: calls, total execution
 * time, rows), written to <file> and <file>.drain. Execution time includes waits on row locks, so
 * a statement that queues behind others shows its wait too. Needs a Postgres started with
 * `shared_preload_libraries = 'pg_stat_statements'` (DATABASE_URL pointing at it); the extension
 * is created in the database the bench connects to.
 */
import { writeFileSync } from 'node:fs';
import type postgres from 'postgres';

const TOP = 40;

export interface StatementSampler {
  /** Starts counting from zero. */
  reset(): Promise<void>;
  /** Writes the statements counted since the last reset, most time first, to `file`. */
  write(file: string, heading: string): Promise<void>;
}

export async function statementSampler(admin: postgres.Sql): Promise<StatementSampler> {
  try {
    await admin.unsafe('create extension if not exists pg_stat_statements');
    await admin.unsafe('select 1 from pg_stat_statements limit 1');
  } catch (err) {
    throw new Error(`BENCH_PG_STATEMENTS needs Postgres started with shared_preload_libraries = 'pg_stat_statements': ${err instanceof Error ? err.message : String(err)}`);
  }
  return {
    reset: async () => {
      await admin.unsafe('select pg_stat_statements_reset()');
    },
    write: async (file, heading) => {
      const rows = await admin.unsafe<{ calls: string; ms: string; rows: string; query: string }[]>(
        `select calls::text, round(total_exec_time::numeric, 1)::text as ms, rows::text, left(regexp_replace(query, '\\s+', ' ', 'g'), 200) as query
         from pg_stat_statements order by total_exec_time desc limit ${TOP}`,
      );
      writeFileSync(file, [`# ${heading}`, 'calls\ttotal ms\trows\tstatement', ...rows.map((r) => `${r.calls}\t${r.ms}\t${r.rows}\t${r.query}`)].join('\n') + '\n');
    },
  };
}
