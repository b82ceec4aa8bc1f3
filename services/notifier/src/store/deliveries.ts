/**
 * The delivery tables (migrations/0002): deliveries, their attempts, endpoint health. Every query
 * of the notifier's webhook side is here.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable, Sql, SqlFragment, TransactionSql } from '@coinvoice/runtime';
import type { DeliveryState } from '../domain/delivery-state';

/** NOTIFY channel: a delivery became due (new, redelivered) or an ordering block was lifted. */
export const DELIVERIES_CHANNEL = 'notifier_deliveries';

export interface DeliveryRow {
  id: string;
  seq: string;
  project_id: string;
  event_id: string;
  event_type: string;
  event_key: string | null;
  url: string;
  body: string;
  status: DeliveryState;
  attempt_count: number;
  next_attempt_at: Date | null;
  lease_token: string | null;
  redelivery_of: string | null;
  /** Closed without an attempt of its own: this other delivery of the same event succeeded. */
  delivered_by: string | null;
  last_attempt_at: Date | null;
  last_response_status: number | null;
  last_error: string | null;
  finished_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface AttemptRow {
  delivery_id: string;
  attempt_number: number;
  attempted_at: Date;
  url: string;
  request_headers: Record<string, string>;
  request_body: string;
  response_status: number | null;
  response_body_excerpt: string;
  duration_ms: number;
  error: string | null;
  details_removed_at: Date | null;
}

export interface EndpointRow {
  project_id: string;
  url: string;
  last_attempt_at: Date | null;
  last_success_at: Date | null;
  last_failure_at: Date | null;
  consecutive_failures: number;
}

export interface NewDelivery {
  projectId: string;
  eventId: string;
  eventType: string;
  eventKey: string | null;
  url: string;
  body: string;
}

/**
 * A webhook event's rows, in ONE statement (docs/performance.md#events): its project event (what
 * `coinvoice listen` streams) and, with `delivery`, its original delivery, due now — each written
 * only when `gate` yields a row. The consumer's gate is its claim of the event (processed_events),
 * so a duplicate writes nothing and the statement needs no transaction around it.
 *
 * With `delivery.lease`, the delivery is inserted already leased to the caller (who sends it right
 * after the statement) unless it must wait behind an earlier one (see `heldBy`). Other replicas are
 * woken (NOTIFY, at commit) only for a delivery left to the claim path. `row` is the new delivery
 * (its lease_token says whether it was leased), undefined when the event already had one.
 */
export async function insertEventRows(
  q: Queryable,
  gate: SqlFragment,
  e: { projectId: string; eventId: string; eventType: string; body: string },
  delivery?: { eventKey: string | null; url: string; lease?: { token: string; leaseMs: number } },
): Promise<{ passed: boolean; row: DeliveryRow | undefined }> {
  const lease = delivery?.lease;
  const deliveryCtes = delivery
    ? q`
      blocked as (
        select exists (
          select 1 from webhook_deliveries earlier
          where ${delivery.eventKey}::text is not null and ${heldBy(q)}
            and earlier.project_id = ${e.projectId} and earlier.event_key = ${delivery.eventKey}
        ) or ${lease === undefined} as yes
      ),
      delivery as (
        insert into webhook_deliveries (id, project_id, event_id, event_type, event_key, url, body, next_attempt_at, lease_token)
        select ${randomUUID()}, ${e.projectId}, ${e.eventId}, ${e.eventType}, ${delivery.eventKey}, ${delivery.url}, ${e.body},
               case when blocked.yes then now() else now() + ${lease?.leaseMs ?? 0}::int * interval '1 millisecond' end,
               case when blocked.yes then null else ${lease?.token ?? null}::uuid end
        from blocked, gate
        on conflict (event_id) where redelivery_of is null do nothing
        returning *
      )`
    : q`delivery as (select * from webhook_deliveries where false)`;
  const [result] = await q<Array<DeliveryRow & { passed: boolean; woken: number }>>`
    with gate as (${gate}),
    project_event as (
      insert into project_events (project_id, event_id, event_type, body)
      select ${e.projectId}, ${e.eventId}, ${e.eventType}, ${e.body} from gate
      on conflict (event_id) do nothing
    ),
    ${deliveryCtes},
    -- As notifyDeliveries, for a delivery left to the claim path; a SELECT CTE runs only when read, hence its count below.
    woken as (select pg_notify(${DELIVERIES_CHANNEL}, ${e.projectId}::text) from delivery where delivery.lease_token is null)
    select exists (select from gate) as passed, (select count(*) from woken)::int as woken, delivery.*
    from (values (1)) as one (x) left join delivery on true`;
  if (!result) throw new Error('insertEventRows returned no row');
  const { passed, woken: _woken, ...row } = result;
  return { passed, row: row.id === null ? undefined : (row as DeliveryRow) };
}

/** A new pending delivery of `original`'s event (same event id and body) to `url`, due now. */
export async function insertRedelivery(tx: TransactionSql, original: DeliveryRow, url: string): Promise<DeliveryRow> {
  const [row] = await tx<DeliveryRow[]>`
    insert into webhook_deliveries (id, project_id, event_id, event_type, event_key, url, body, next_attempt_at, redelivery_of)
    values (${randomUUID()}, ${original.project_id}, ${original.event_id}, ${original.event_type}, ${original.event_key},
            ${url}, ${original.body}, now(), ${original.id})
    returning *`;
  if (!row) throw new Error('insert returned no row');
  await notifyDeliveries(tx);
  return row;
}

/**
 * Delivered by Postgres at commit; repeats within one transaction are folded into one. With
 * `projectId`, the delivery is that project's: a replica whose slots for it are all in use need
 * not look (its next free slot makes it look; docs/webhook-delivery.md#claims). Without, every
 * replica looks.
 */
export async function notifyDeliveries(q: Queryable, projectId?: string): Promise<void> {
  await q`select pg_notify(${DELIVERIES_CHANNEL}, ${projectId ?? ''})`;
}

/**
 * What makes `earlier` hold a later original delivery of the same project and event key: it is
 * an original, pending, and still on its FIRST attempt (in flight, or not yet made). Order costs
 * nothing then: the attempt ends within the timeout. Once it has failed, later events of the
 * invoice go out without waiting for its retries, and receivers order by the body's occurredAt
 * (docs/webhook-delivery.md). Redeliveries (manual) neither wait nor hold.
 */
function heldBy(sql: Queryable) {
  return sql`earlier.status = 'pending' and earlier.redelivery_of is null and earlier.attempt_count = 0`;
}

/**
 * A due pending delivery may be sent unless an earlier original holds it (heldBy). Written with
 * OR so Postgres checks it row by row (one probe of the ordering index) as it walks the due-time
 * index, and stops at the claim's limit: as a bare NOT EXISTS it became an anti-join over every
 * pending delivery, the whole backlog read on every claim (docs/webhook-delivery.md#claims; services/notifier/test/store-claim-plan.test.ts).
 */
function sendable(sql: Queryable) {
  return sql`
    d.status = 'pending'
    and (d.redelivery_of is not null or d.event_key is null or not exists (
      select 1 from webhook_deliveries earlier
      where ${heldBy(sql)}
        and earlier.project_id = d.project_id and earlier.event_key = d.event_key
        and earlier.seq < d.seq
    ))`;
}

export interface ClaimOptions {
  /** Most deliveries to claim. */
  limit: number;
  /** Most deliveries of one project in flight in this replica (docs/webhook-delivery.md). */
  perProject: number;
  /** Attempts this replica has in flight per project: they use up the project's slots. */
  busy: ReadonlyMap<string, number>;
  /** The lease: how long the claimed deliveries stay hidden from every replica. */
  leaseMs: number;
  /** Only deliveries of these projects (those whose slot just freed, while the others have nothing to claim). */
  onlyProjects?: readonly string[];
}

export interface Claim {
  /** The deliveries claimed, now leased to this replica. */
  rows: DeliveryRow[];
  /**
   * The walk read every due sendable delivery it could take (fewer than it would have read): a
   * project of `onlyProjects` left with a free slot then has nothing more due here. False when it
   * stopped at its limit, so more may be due.
   */
  sawAllDue: boolean;
}

/**
 * Claims due sendable deliveries for this replica: locks them (SKIP LOCKED: replicas never take
 * the same row), pushes next_attempt_at past the lease and stamps a lease token, in one short
 * transaction. No project gets more than its free slots, so a project with a backlog (a slow
 * receiver, a burst of test events) cannot fill the claim. The attempt is made after it commits;
 * only the token's holder records its outcome.
 */
export async function claimDueDeliveries(sql: Queryable, options: ClaimOptions): Promise<Claim> {
  if (options.limit <= 0) return { rows: [], sawAllDue: false };
  const busyProjects = [...options.busy.keys()];
  const busyCounts = busyProjects.map((project) => options.busy.get(project) ?? 0);
  const fullProjects = fullProjectsOf(options);
  // Restricted to some projects, no more rows than their free slots can take; over every project,
  // more, since a project's rows beyond its free slots are passed over after the walk.
  const candidateLimit = options.onlyProjects
    ? Math.min(options.limit, options.onlyProjects.reduce((sum, project) => sum + Math.max(0, options.perProject - (options.busy.get(project) ?? 0)), 0))
    : Math.max(options.limit * 4, 64);
  if (candidateLimit <= 0) return { rows: [], sawAllDue: false };
  const token = randomUUID();
  const result = await sql<(DeliveryRow & { candidates_seen: number })[]>`
    with busy as (
      select project_id, count from unnest(${busyProjects}::text[], ${busyCounts}::int[]) as b(project_id, count)
    ),
    candidates as (
      select d.id, d.project_id, d.next_attempt_at, d.seq
      from webhook_deliveries d
      left join busy on busy.project_id = d.project_id
      -- A full project's rows are passed over by the scan's cheap filter, before the hold check
      -- (Postgres evaluates a subquery last): walking its backlog reads index entries only.
      where d.next_attempt_at <= now() and d.project_id <> all(${fullProjects}::text[]) and ${sendable(sql)}
        and coalesce(busy.count, 0) < ${options.perProject}
        ${options.onlyProjects ? sql`and d.project_id = any(${[...options.onlyProjects]}::text[])` : sql``}
      order by d.next_attempt_at, d.seq
      limit ${candidateLimit}
    ),
    -- Ranked after the limit, so the due-time index is read only as far as the limit: a window
    -- over every due row sorted the whole backlog on every claim (15-27 ms at 9,000 due, one claim
    -- per webhook while draining). The ranks are the same: the rows of a project that come before
    -- a candidate in this order are candidates too.
    ranked as (
      select c.*, row_number() over (partition by c.project_id order by c.next_attempt_at, c.seq) as rank_in_project
      from candidates c
    ),
    picked as (
      select c.id from ranked c
      left join busy on busy.project_id = c.project_id
      where c.rank_in_project <= ${options.perProject} - coalesce(busy.count, 0)
      order by c.next_attempt_at, c.seq
      limit ${options.limit}
    ),
    -- By primary key (docs/webhook-delivery.md#plans): as a semi-join with picked, a planner that
    -- believed the pending deliveries few walked every due one. Due and pending are checked again
    -- on the row locked: another replica may have claimed it meanwhile.
    locked as (
      select d.id from webhook_deliveries d
      where d.id = any(array(select id from picked)) and d.status = 'pending' and d.next_attempt_at <= now()
      for update skip locked
    ),
    claimed as (
      update webhook_deliveries d
      set next_attempt_at = now() + ${options.leaseMs}::int * interval '1 millisecond',
          lease_token = ${token}, updated_at = now()
      from locked
      where d.id = locked.id
      returning d.*
    )
    -- One row even when nothing was claimed, to say how far the walk read.
    select claimed.*, seen.n as candidates_seen
    from (select count(*)::int as n from candidates) seen
    left join claimed on true`;
  const rows = result.filter((row) => row.id !== null).map(({ candidates_seen: _seen, ...row }) => row);
  return { rows, sawAllDue: (result[0]?.candidates_seen ?? 0) < candidateLimit };
}

/**
 * When this replica should look again, asked after a claim found nothing: the earliest due time,
 * still to come, of a sendable delivery whose project is not at its limit here. What is due now
 * and was not claimed belongs to a project at its limit (a finishing attempt wakes the worker),
 * is held behind an earlier one (its end wakes the replicas) or is being claimed by another
 * replica. Only the future is read: a project's backlog due now, however long, is not walked
 * through (docs/webhook-delivery.md#claims).
 */
export async function nextDueAt(sql: Queryable, options: { perProject: number; busy: ReadonlyMap<string, number> }): Promise<Date | null> {
  const fullProjects = fullProjectsOf(options);
  const [row] = await sql<{ due: Date | null }[]>`
    select d.next_attempt_at as due
    from webhook_deliveries d
    where d.next_attempt_at > now() and ${sendable(sql)} and d.project_id <> all(${fullProjects}::text[])
    order by d.next_attempt_at
    limit 1`;
  return row?.due ?? null;
}

/** The projects whose slots are all in use here: a claim or nextDueAt passes over their deliveries. */
function fullProjectsOf(options: { perProject: number; busy: ReadonlyMap<string, number> }): string[] {
  return [...options.busy].filter(([, inUse]) => inUse >= options.perProject).map(([project]) => project);
}

/** The delivery's state after an attempt, as the state machine computed it. */
export interface AttemptOutcomeUpdate {
  /** Where the attempt went: the project's webhook URL at the time (it may have changed since creation). */
  url: string;
  status: DeliveryState;
  attemptCount: number;
  nextAttemptAt: Date | null;
  finishedAt: Date | null;
  lastAttemptAt: Date;
  lastResponseStatus: number | null;
  lastError: string | null;
}

export interface NewAttempt {
  attemptNumber: number;
  attemptedAt: Date;
  url: string;
  requestHeaders: Record<string, string>;
  requestBody: string;
  responseStatus: number | null;
  responseBodyExcerpt: string;
  durationMs: number;
  error: string | null;
}

/** An attempt that ended, as the worker records it (see recordAttempt). */
export interface EndedAttempt {
  /** The delivery as claimed: attempt_count is the attempts before this one. */
  delivery: Pick<DeliveryRow, 'id' | 'project_id' | 'event_id' | 'event_key' | 'redelivery_of' | 'attempt_count'>;
  /** The lease the attempt was made under: its outcome is applied only while it is still the delivery's. */
  leaseToken: string;
  update: AttemptOutcomeUpdate;
  attempt: NewAttempt;
  /** The receiver answered 2xx. */
  success: boolean;
}

/**
 * Records an ended attempt in ONE statement (docs/webhook-delivery.md#recording): on this kind of
 * host a statement's round trip costs more than its work, and an attempt touched five tables'
 * rows in a transaction of seven. What it does, all or nothing:
 *
 * - the attempt row and the endpoint's health, always (an attempt whose lease was lost is still logged);
 * - the delivery's next state, only while `leaseToken` is still its lease and it is pending
 *   (another replica may have taken it over when the lease ran out): `ours` says whether it was;
 *   closed meanwhile by another delivery of its event that succeeded (`deliveredMeanwhile`), it
 *   stays succeeded and shows this attempt's count, time and answer;
 * - if ours and it succeeded: every other pending delivery of its event is closed as delivered by
 *   it (the receiver has the event; what waited behind them may go);
 * - if ours and it was an original's first attempt: whether a later original of its project and
 *   event key waits behind it (see heldBy: the hold ends with the first attempt, whatever its outcome).
 *
 * The replicas are woken (NOTIFY, at commit) when something was closed or waits behind it. Inside
 * `tx` when the caller has more to write in the same transaction (the failure event).
 */
export async function recordAttempt(q: Queryable, ended: EndedAttempt): Promise<{ ours: boolean; deliveredMeanwhile: boolean }> {
  const { delivery: d, update: u, attempt: a, success } = ended;
  const releasesKey = d.attempt_count === 0 && d.redelivery_of === null && d.event_key !== null;
  const [row] = await q<{ ours: boolean; delivered_meanwhile: boolean }[]>`
    with outcome as (
      update webhook_deliveries
      set url = ${u.url}, status = ${u.status}, attempt_count = ${u.attemptCount}, next_attempt_at = ${u.nextAttemptAt},
          finished_at = ${u.finishedAt}, last_attempt_at = ${u.lastAttemptAt},
          last_response_status = ${u.lastResponseStatus}, last_error = ${u.lastError},
          lease_token = null, updated_at = now()
      where id = ${d.id} and lease_token = ${ended.leaseToken} and status = 'pending'
      returning id
    ),
    -- Closed while in flight by another delivery of its event that succeeded first (concurrent
    -- redeliveries): it stays succeeded (delivered_by), and still shows the attempt it made.
    delivered_meanwhile as (
      update webhook_deliveries
      set attempt_count = greatest(attempt_count, ${u.attemptCount}), last_attempt_at = ${u.lastAttemptAt},
          last_response_status = ${u.lastResponseStatus}, updated_at = now()
      where id = ${d.id} and not exists (select 1 from outcome) and status = 'succeeded' and delivered_by is not null
      returning id
    ),
    attempt as (
      insert into webhook_attempts (delivery_id, attempt_number, attempted_at, url, request_headers, request_body,
                                    response_status, response_body_excerpt, duration_ms, error)
      values (${d.id}, ${a.attemptNumber}, ${a.attemptedAt}, ${a.url}, ${q.json(a.requestHeaders)}, ${a.requestBody},
              ${a.responseStatus}, ${a.responseBodyExcerpt}, ${a.durationMs}, ${a.error})
    ),
    health as (
      insert into webhook_endpoints (project_id, url, last_attempt_at, last_success_at, last_failure_at, consecutive_failures)
      values (${d.project_id}, ${a.url}, ${a.attemptedAt}, case when ${success} then ${a.attemptedAt}::timestamptz end,
              case when ${success} then null else ${a.attemptedAt}::timestamptz end, case when ${success} then 0 else 1 end)
      on conflict (project_id, url) do update
      set last_attempt_at = greatest(webhook_endpoints.last_attempt_at, excluded.last_attempt_at),
          last_success_at = greatest(webhook_endpoints.last_success_at, excluded.last_success_at),
          last_failure_at = greatest(webhook_endpoints.last_failure_at, excluded.last_failure_at),
          consecutive_failures = case when ${success} then 0 else webhook_endpoints.consecutive_failures + 1 end
    ),
    closed as (
      update webhook_deliveries
      set status = 'succeeded', next_attempt_at = null, lease_token = null, finished_at = now(),
          delivered_by = ${d.id}, last_error = ${`delivered by delivery ${d.id}`}, updated_at = now()
      where ${success} and exists (select 1 from outcome)
        and event_id = ${d.event_id} and project_id = ${d.project_id} and status = 'pending' and id <> ${d.id}
      returning id
    ),
    waiting as (
      -- The rows that can be held are exactly those of webhook_deliveries_ordering_idx (migration 0041).
      select 1 from webhook_deliveries
      where ${releasesKey} and exists (select 1 from outcome)
        and project_id = ${d.project_id} and event_key = ${d.event_key}
        and status = 'pending' and redelivery_of is null and event_key is not null and attempt_count = 0
        and id <> ${d.id}
      limit 1
    )
    select exists (select 1 from outcome) as ours, exists (select 1 from delivered_meanwhile) as delivered_meanwhile,
           case when exists (select 1 from closed) or exists (select 1 from waiting)
                then pg_notify(${DELIVERIES_CHANNEL}, '') end as woke`;
  return { ours: row?.ours === true, deliveredMeanwhile: row?.delivered_meanwhile === true };
}

/** Gives a claimed delivery back without an attempt (e.g. auth unreachable): due again at `dueAt`. */
export async function releaseLease(sql: Sql, deliveryId: string, leaseToken: string, dueAt: Date): Promise<void> {
  await sql`
    update webhook_deliveries set next_attempt_at = ${dueAt}, lease_token = null, updated_at = now()
    where id = ${deliveryId} and lease_token = ${leaseToken} and status = 'pending'`;
}

export async function findEndpoint(q: Queryable, projectId: string, url: string): Promise<EndpointRow | undefined> {
  const [row] = await q<EndpointRow[]>`select * from webhook_endpoints where project_id = ${projectId} and url = ${url}`;
  return row;
}

export async function findDelivery(q: Queryable, projectId: string, deliveryId: string): Promise<DeliveryRow | undefined> {
  const [row] = await q<DeliveryRow[]>`select * from webhook_deliveries where id = ${deliveryId} and project_id = ${projectId}`;
  return row;
}

export async function listAttempts(q: Queryable, deliveryId: string): Promise<AttemptRow[]> {
  return q<AttemptRow[]>`
    select delivery_id, attempt_number, attempted_at, url, request_headers, request_body, response_status,
           response_body_excerpt, duration_ms, error, details_removed_at
    from webhook_attempts where delivery_id = ${deliveryId} order by attempt_number, id`;
}

export interface ListDeliveriesQuery {
  projectId: string;
  status?: DeliveryState;
  eventType?: string;
  /** Only deliveries whose JSON body's invoiceId is this. */
  invoiceId?: string;
  /** Only deliveries older than this seq (the cursor). */
  beforeSeq?: string;
  limit: number;
}

/** Newest first; one more row than `limit` tells whether there is a next page. */
export async function listDeliveries(q: Sql, query: ListDeliveriesQuery): Promise<DeliveryRow[]> {
  return q<DeliveryRow[]>`
    select * from webhook_deliveries
    where project_id = ${query.projectId}
      ${query.status ? q`and status = ${query.status}` : q``}
      ${query.eventType ? q`and event_type = ${query.eventType}` : q``}
      ${query.invoiceId ? q`and body::jsonb ->> 'invoiceId' = ${query.invoiceId}` : q``}
      ${query.beforeSeq ? q`and seq < ${query.beforeSeq}` : q``}
    order by seq desc
    limit ${query.limit + 1}`;
}

/**
 * Retention (docs/accounting.md): removes the request headers and body and the response excerpt of
 * up to `limit` attempts older than `olderThanDays`; their summary rows stay. Returns how many.
 */
export async function removeOldAttemptDetails(sql: Sql, options: { olderThanDays: number; limit: number }): Promise<number> {
  const result = await sql`
    update webhook_attempts set request_headers = '{}'::jsonb, request_body = '', response_body_excerpt = '', details_removed_at = now()
    where id in (
      select id from webhook_attempts
      where details_removed_at is null and attempted_at < now() - make_interval(days => ${options.olderThanDays})
      order by attempted_at limit ${options.limit})`;
  return result.count;
}
