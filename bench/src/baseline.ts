/**
 * The benchmark's yardstick: a bare Fastify route doing one Postgres INSERT of the same row an
 * invoice creation writes, nothing else (no auth, no gRPC hop, no validation, no events).
 * Run as its own process so it competes for the machine exactly as the gateway does.
 */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import postgres from 'postgres';

async function main(): Promise<void> {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is required');
  const sql = postgres(url, { max: 10, onnotice: () => undefined });
  await sql`create schema if not exists bench_baseline`;
  await sql`
    create table if not exists bench_baseline.invoices (
      id uuid primary key, project_id uuid not null, environment text not null, order_id text,
      order_description text, price_amount numeric not null, price_currency text not null,
      price_amount_in_usd numeric not null, pay_currency text not null, rate numeric not null,
      amount_expected numeric not null, amount_received numeric not null default 0,
      status text not null default 'Waiting', address text not null, address_index integer not null,
      success_url text not null, cancel_url text not null, is_donation boolean not null default false,
      created_at timestamptz not null default now(), expired_at timestamptz not null)`;
  const projectId = randomUUID();
  let index = 0;
  const app = Fastify({ logger: false });
  app.post('/invoice', async (_req, reply) => {
    const id = randomUUID();
    const [row] = await sql`
      insert into bench_baseline.invoices (id, project_id, environment, order_id, price_amount, price_currency,
        price_amount_in_usd, pay_currency, rate, amount_expected, address, address_index, success_url, cancel_url, expired_at)
      values (${id}, ${projectId}, 'sandbox', 'bench', '19.90', 'USD', '19.90', 'BTC', '105000', '0.00018953',
        ${`tb1qbaseline${index}`}, ${index++}, 'https://example.com/ok', 'https://example.com/cancel', now() + interval '1 hour')
      returning id, created_at`;
    return reply.code(201).send(row);
  });
  app.get<{ Params: { id: string } }>('/invoice/:id', async (req) => {
    const [row] = await sql`select * from bench_baseline.invoices where id = ${req.params.id}`;
    return row;
  });
  const address = await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
  process.stdout.write(`baseline listening at ${address}\n`);
  process.on('SIGTERM', () => {
    void app.close().then(() => sql.end()).then(() => process.exit(0));
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`baseline failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
