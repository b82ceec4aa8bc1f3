/**
 * Many open live invoices at once, for the watcher's cost tests: copies of a real invoice, each
 * with an address of its own, written in one statement (not through the API).
 */
import type { Sql } from '@coinvoice/runtime';

export async function copyOpenInvoices(sql: Sql, templateId: string, addresses: readonly string[]): Promise<void> {
  const columns = (
    await sql<{ column_name: string }[]>`
      select column_name from information_schema.columns where table_schema = current_schema() and table_name = 'invoices' order by ordinal_position`
  ).map((c) => c.column_name);
  const values = columns.map((c) => (c === 'id' ? 'gen_random_uuid()' : c === 'address' ? 'a.address' : c === 'address_index' ? '(1500000000 + (select count(*) from invoices) + a.n)::int' : `i.${c}`));
  await sql.unsafe(
    `insert into invoices (${columns.join(', ')}) select ${values.join(', ')} from invoices i, unnest($1::text[]) with ordinality as a(address, n) where i.id = $2`,
    [addresses as string[], templateId],
  );
}
