/**
 * What waits in a service's outbox, read at scrape time (docs/events.md#outbox-backlog): events
 * written and not yet published — NATS down, the relay stuck, a stream refused. Requests never wait
 * on NATS, so nothing else shows it: webhooks and credits are simply late (an outside review found
 * no gauge and no alert for it).
 */
import { Gauge, type Registry } from 'prom-client';
import type { Queryable } from '../db';

/** Counted up to this many (a count of a huge backlog is not worth its scan at every scrape). */
const COUNT_CAP = 100_000;
/** A scrape waits this long for the figures, then answers without them (a pool saturated, Postgres slow). */
const READ_TIMEOUT_MS = 2_000;

export function registerOutboxMetrics(registry: Registry, sql: Queryable): void {
  let pending: Promise<{ n: number; age: number } | undefined> | undefined;
  // One query per scrape for both gauges; Postgres unreachable leaves them as they were (the
  // scrape itself must not fail: every other metric is in it).
  const query = () =>
    sql<{ n: number; age: number }[]>`
      select (select count(*) from (select 1 from outbox where published_at is null limit ${COUNT_CAP}) as waiting)::int as n,
             coalesce(extract(epoch from now() - (select created_at from outbox where published_at is null order by seq limit 1)), 0)::float8 as age`.then(
      ([row]) => row ?? { n: 0, age: 0 },
      () => undefined,
    );
  const read = () =>
    (pending ??= Promise.race([query(), new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), READ_TIMEOUT_MS).unref())]).finally(() =>
      setImmediate(() => (pending = undefined)),
    ));
  new Gauge({
    name: 'outbox_unpublished_events',
    help: `Events written to this service's outbox and not yet published to NATS (counted up to ${COUNT_CAP})`,
    registers: [registry],
    async collect() {
      const now = await read();
      if (now) this.set(now.n);
    },
  });
  new Gauge({
    name: 'outbox_oldest_unpublished_seconds',
    help: 'Age of the oldest event not yet published to NATS; 0 when none waits',
    registers: [registry],
    async collect() {
      const now = await read();
      if (now) this.set(Math.max(0, now.age));
    },
  });
}
