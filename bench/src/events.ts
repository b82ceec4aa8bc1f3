/**
 * `npm run bench:events`: the event path's own costs, without the services: how fast the outbox
 * relay moves committed events to JetStream, and how fast an idempotent consumer applies them
 * (one transaction each), on this machine's Postgres and NATS. Prints events per second and the
 * relay's and consumer's CPU per event (this process). `BENCH_EVENTS` (default 2,000) events
 * over `BENCH_KEYS` (default 200) invoices; `BENCH_CONSUMER_BATCH` sets the consumer's pull batch.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { connectNats, createDb, createLogger, enqueueEvent, eventTransaction, ensureStream, EVENT_TABLES_DDL, EventNamespace, EventSigner, EventVerifier, formatVerifyKeys, generateEventKeyPair, IdempotentConsumer, migrate, OutboxRelay, parseVerifyKeys } from '@coinvoice/runtime';
import { resolveNats, resolvePostgres } from '@coinvoice/local';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2_000);
const KEYS = Number(process.env.BENCH_KEYS ?? 200);
const CONSUMER_BATCH = Number(process.env.BENCH_CONSUMER_BATCH ?? 32);

async function until(what: string, done: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function cpuMs(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-bench-events-'));
  const pg = await resolvePostgres(process.env, dataDir);
  const nats = await resolveNats(process.env, dataDir);
  const dbName = `bench_events_${randomBytes(4).toString('hex')}`;
  const admin = postgres(pg.url, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`create database "${dbName}"`);
  const url = new URL(pg.url);
  url.pathname = `/${dbName}`;
  const logger = createLogger({ service: 'bench-events', level: 'warn' });
  const sql = createDb({ url: url.toString(), schema: 'bench', max: 10 });
  const nc = await connectNats({ url: nats.url, name: 'bench-events' });
  const namespace = new EventNamespace(`bench${randomBytes(3).toString('hex')}`);
  const migrations = mkdtempSync(path.join(tmpdir(), 'coinvoice-bench-events-mig-'));
  writeFileSync(path.join(migrations, '0001_events.sql'), `${EVENT_TABLES_DDL}\ncreate table applied (event_id text primary key, invoice_id text not null);`);
  const jsm = await nc.jetstreamManager();
  try {
    await migrate(sql, { schema: 'bench', dir: migrations });
    const stream = (await ensureStream(jsm, { namespace, service: 'invoice' })).config.name;

    // The outbox: EVENTS committed events (100 per transaction), then the relay moves them.
    for (let first = 0; first < EVENTS; first += 100) {
      await eventTransaction(sql, async (tx) => {
        for (let i = first; i < Math.min(EVENTS, first + 100); i++) {
          await enqueueEvent(tx, { type: 'invoice.paid', key: `inv-${i % KEYS}`, payload: { invoiceId: `inv-${i % KEYS}`, n: i } });
        }
      });
    }
    // Signed and verified as in the services: the measured cost includes Ed25519 both ways.
    const signer = EventSigner.fromPem(generateEventKeyPair().privateKeyPem);
    const verifier = new EventVerifier(parseVerifyKeys(formatVerifyKeys({ invoice: signer.publicKey })) ?? new Map());
    const relay = new OutboxRelay({ sql, nats: nc, namespace, signer, logger, signatures: 'batch' });
    let cpu = process.cpuUsage();
    let started = performance.now();
    await relay.start();
    await until('the relay', async () => (await jsm.streams.info(stream)).state.messages >= EVENTS);
    const relaySeconds = (performance.now() - started) / 1000;
    const relayCpu = cpuMs(cpu);
    await relay.stop();

    // The consumer: the same events applied, one transaction each.
    const consumer = new IdempotentConsumer({
      sql,
      nats: nc,
      stream,
      name: 'bench',
      filterSubjects: [namespace.subject('invoice.paid')],
      verifier,
      logger,
      batchSize: CONSUMER_BATCH,
      handler: async (tx, event) => {
        const payload = event.payload as { invoiceId: string };
        await tx`insert into applied (event_id, invoice_id) values (${event.id}, ${payload.invoiceId})`;
      },
    });
    cpu = process.cpuUsage();
    started = performance.now();
    await consumer.start();
    await until('the consumer', async () => (await sql<{ n: number }[]>`select count(*)::int as n from applied`)[0]?.n === EVENTS);
    const consumerSeconds = (performance.now() - started) / 1000;
    const consumerCpu = cpuMs(cpu);
    await consumer.stop();

    console.log(`${EVENTS} events over ${KEYS} keys (Node ${process.version})`);
    console.log(`outbox relay: ${(EVENTS / relaySeconds).toFixed(0)} events/s, ${(relayCpu / EVENTS).toFixed(3)} ms CPU per event`);
    console.log(`consumer (pull batch ${CONSUMER_BATCH}): ${(EVENTS / consumerSeconds).toFixed(0)} events/s, ${(consumerCpu / EVENTS).toFixed(3)} ms CPU per event`);
  } finally {
    await jsm.streams.delete(namespace.streamName('invoice')).catch(() => undefined);
    await nc.close();
    await sql.end({ timeout: 5 });
    await admin.unsafe(`drop database if exists "${dbName}" with (force)`).catch(() => undefined);
    await admin.end();
    await nats.stop();
    await pg.stop();
    rmSync(migrations, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
