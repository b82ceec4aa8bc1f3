/**
 * The delivery worker: sends due webhook deliveries, records every attempt, schedules retries.
 *
 *   claim    one short transaction: due, sendable deliveries FOR UPDATE SKIP LOCKED (replicas never
 *            take the same row), next_attempt_at pushed past the lease, a lease token stamped
 *   attempt  outside any transaction: the project's CURRENT secret from auth, the SSRF guard
 *            (resolve, check every address), sign, POST with the timeout, no redirects
 *   record   one statement: the attempt row and the endpoint's health, and, only while the lease
 *            token is still ours, the delivery's next state (state machine + retry schedule); a
 *            transaction only when it gave up, for the notifier.webhook_delivery_failed event
 *
 * A replica that dies mid-attempt leaves the delivery leased; when the lease runs out any replica
 * sends it again (same webhook-id): at least once. Concurrency is bounded per replica overall, per
 * project and per destination host (of the URL actually called), so a slow or silent receiver, or
 * a project sending bursts of test events, holds at most a bounded share of the slots and never
 * delays another merchant's webhooks (docs/webhook-delivery.md). New deliveries wake the worker at
 * once (in-process signal, and NOTIFY across replicas); a poll is the fallback.
 *
 * Fast path (pay-to-webhook latency): the replica whose consumer creates a delivery reserves a
 * slot first, inserts the row already leased to itself, and after commit sends it straight away
 * with the project context the consumer read from auth milliseconds before: no claim query, no
 * second auth call. If it dies before sending, the lease runs out and any replica sends it.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { enqueueEvent, eventTransaction, isDatabaseUnavailableError, type Logger, type NewEvent, type Sql, type Worker } from '@coinvoice/runtime';
import { WebhookDeliveryFailedSchema } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/events_pb';
import { applyDeliveryEvent, deliveryEventForAttempt, type WebhookDelivery } from '../domain/delivery-state';
import { destinationHost, Slots } from '../domain/delivery-slots';
import { classifyAttempt, type AttemptResult, type RandomSource, type RetrySchedule } from '../domain/retry-schedule';
import { signingSecrets, webhookDeliveryHeaders, type SigningSecrets } from '../domain/signing';
import type { SsrfGuard } from '@coinvoice/domain/ssrf';
import type { ProjectContext, ProjectDirectory } from '../project-context';
import {
  claimDueDeliveries,
  DELIVERIES_CHANNEL,
  nextDueAt,
  recordAttempt,
  releaseLease,
  type DeliveryRow,
  type EndedAttempt,
} from '../store/deliveries';
import type { HttpAttempt, HttpSender } from './http-sender';

export const WEBHOOK_DELIVERY_FAILED = 'notifier.webhook_delivery_failed';

export interface DeliveryWorkerOptions {
  sql: Sql;
  logger: Logger;
  projects: Pick<ProjectDirectory, 'get'>;
  guard: SsrfGuard;
  sender: HttpSender;
  schedule: RetrySchedule;
  timeoutMs: number;
  maxConcurrency: number;
  /** Attempts in flight per project: its share of maxConcurrency. */
  maxPerProject: number;
  /** Attempts in flight per destination host, whichever projects' URLs name it. */
  maxPerHost: number;
  pollIntervalMs: number;
  /** Lease of a claimed delivery (default timeoutMs + 5 s: the auth call, the attempt, the record). */
  leaseMs?: number;
  random?: RandomSource;
  /** Observes every recorded attempt (metrics). */
  onAttempt?: (info: { delivery: DeliveryRow; outcome: 'success' | 'failure'; durationMs: number }) => void;
  /**
   * Observes every claim query made: how many deliveries it claimed, and whether it looked at every
   * project or only at those whose slot had just freed (metrics).
   */
  onClaim?: (info: { claimed: number; scope: 'all' | 'freed_projects' }) => void;
}

/** A slot held for a delivery this replica is creating (see DeliveryWorker.reserve). */
export interface Reservation {
  /** The lease token to insert the row with. */
  readonly token: string;
  readonly leaseMs: number;
  /** After commit: send the row now, with the context just read from auth. */
  launch(row: DeliveryRow, context: ProjectContext): void;
  /** Not used (rolled back, or the row could not be leased): frees the slot. */
  release(): void;
}

interface AttemptRecord {
  attemptedAt: Date;
  headers: Record<string, string>;
  result: AttemptResult;
  responseStatus: number | null;
  excerpt: string;
  durationMs: number;
  error: string | null;
}

export class DeliveryWorker implements Worker {
  private readonly logger: Logger;
  private readonly leaseMs: number;
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Slots in use (in flight or reserved) per project id and per destination host. */
  private readonly busyProjects = new Slots();
  private readonly busyHosts = new Slots();
  private reservedSlots = 0;
  private wakeRequested = false;
  /** Counts wake() calls: one that came while a claim ran means the claim may not have seen everything. */
  private wakes = 0;
  /** Projects whose slot freed since the loop last looked. */
  private readonly freedProjects = new Set<string>();
  /**
   * Until when a claim over every project is known to find nothing here, but for the projects in
   * `mayHaveQueued`: the last such claim found nothing. Meanwhile a freed slot claims for its own
   * project if that project may have deliveries waiting, and makes no claim at all otherwise; any
   * other reason to look (a new delivery, a NOTIFY, a retry coming due, the poll) ends it
   * (docs/webhook-delivery.md#claims).
   */
  private exhaustedUntil = 0;
  /**
   * Projects whose due deliveries that claim could not take (every slot in use), or that had a
   * delivery queued since while every slot was in use; dropped once a claim for one of them
   * leaves a slot unfilled.
   */
  private readonly mayHaveQueued = new Set<string>();
  /** The earliest due time of a delivery this replica put back or retried since a claim over every project began. */
  private earliestDueAgain = Infinity;
  private interruptSleep: (() => void) | undefined;
  private listener: { unlisten(): Promise<void> } | undefined;

  constructor(private readonly options: DeliveryWorkerOptions) {
    this.logger = options.logger.child({ component: 'delivery-worker' });
    this.leaseMs = options.leaseMs ?? options.timeoutMs + 5_000;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      // (Re)connected: notifications sent meanwhile are lost, so look now.
      this.listener = await this.options.sql.listen(DELIVERIES_CHANNEL, (projectId) => (projectId ? this.wakeFor(projectId) : this.wake()), () => this.wake());
    } catch (err) {
      this.logger.warn({ err }, 'delivery worker: LISTEN failed; polling only');
    }
    this.loop = this.run();
  }

  /** Stops claiming, lets the attempts in flight finish and be recorded. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.interruptSleep?.();
    await this.loop;
    await Promise.allSettled([...this.inFlight.values()]);
    await this.listener?.unlisten().catch(() => undefined);
    this.listener = undefined;
  }

  /**
   * Holds a slot (overall, for the project and for the host of `url`, the URL the delivery will be
   * sent to) for a delivery about to be created in this replica, or undefined when none is free
   * (the delivery then goes the claim way). A reservation not launched or released within 10 s
   * frees itself.
   */
  reserve(projectId: string, url: string): Reservation | undefined {
    if (!this.running) return undefined;
    const host = destinationHost(url);
    if (this.inFlight.size + this.reservedSlots >= this.options.maxConcurrency) return undefined;
    if (this.projectFull(projectId)) return undefined;
    if (host === undefined || this.busyHosts.count(host) >= this.options.maxPerHost) return undefined;
    this.reservedSlots += 1;
    this.busyProjects.take(projectId);
    this.busyHosts.take(host);
    let held = true;
    const free = (): boolean => {
      if (!held) return false;
      held = false;
      clearTimeout(timer);
      this.reservedSlots -= 1;
      return true;
    };
    const release = () => {
      if (!free()) return;
      this.busyProjects.give(projectId);
      this.busyHosts.give(host);
      this.wake();
    };
    const timer = setTimeout(release, 10_000);
    timer.unref();
    return {
      token: randomUUID(),
      leaseMs: this.leaseMs,
      release,
      launch: (row, context) => {
        // Expired meanwhile: the row stays leased and is sent when the lease runs out.
        if (!free()) return;
        this.launch(row, { context, projectSlotTaken: true, hostHeld: host });
      },
    };
  }

  /**
   * A delivery of `projectId` was queued for the claim path by this replica (no slot was free to
   * send it at once). Look now only if the project has a slot free here: while they are all in
   * use, one freeing wakes the worker anyway, and a claim meanwhile would walk every due delivery
   * of that project only to skip them (docs/webhook-delivery.md#claims).
   */
  wakeFor(projectId: string): void {
    if (this.projectFull(projectId)) {
      this.mayHaveQueued.add(projectId);
      return;
    }
    this.wake();
  }

  /** Look for due deliveries now (a delivery was just created or unblocked). */
  wake(): void {
    this.wakes += 1;
    this.exhaustedUntil = 0;
    this.wakeRequested = true;
    this.interruptSleep?.();
  }

  /**
   * An attempt of `projectId` ended: its slot is free, which may let one more of its deliveries go —
   * unless the last claim over every project found none waiting for it (what went out straight from
   * the consumer, which reserves a slot per new event, leaves nothing to claim).
   */
  private slotFreed(projectId: string): void {
    if (Date.now() < this.exhaustedUntil && !this.mayHaveQueued.has(projectId)) return;
    this.freedProjects.add(projectId);
    this.wakeRequested = true;
    this.interruptSleep?.();
  }

  /** A delivery put back without an attempt comes due at `at`: look no later than that. */
  private dueAgainAt(at: Date): void {
    this.earliestDueAgain = Math.min(this.earliestDueAgain, at.getTime());
    if (this.exhaustedUntil === 0 || at.getTime() >= this.exhaustedUntil) return;
    this.exhaustedUntil = at.getTime();
    this.wakeRequested = true;
    this.interruptSleep?.();
  }

  /** Every slot of the project is in use here (in flight or reserved). */
  private projectFull(projectId: string): boolean {
    return this.busyProjects.count(projectId) >= this.options.maxPerProject;
  }

  /** The projects whose every slot is in use here. */
  private fullProjects(): string[] {
    return [...this.busyProjects.counts.keys()].filter((projectId) => this.projectFull(projectId));
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      this.wakeRequested = false;
      // A freed slot may already be taken again (a reservation of the consumer): a claim for a full
      // project would walk its due deliveries only to skip them.
      const only =
        Date.now() < this.exhaustedUntil ? [...this.freedProjects].filter((projectId) => this.mayHaveQueued.has(projectId) && !this.projectFull(projectId)) : undefined;
      this.freedProjects.clear();
      const free = this.options.maxConcurrency - this.inFlight.size - this.reservedSlots;
      let claimed: DeliveryRow[] = [];
      if (free > 0 && (only === undefined || only.length > 0)) {
        const wakesBefore = this.wakes;
        const freeSlots = new Map((only ?? []).map((projectId) => [projectId, this.options.maxPerProject - this.busyProjects.count(projectId)]));
        // The projects this claim passes over: their due deliveries stay unseen.
        const fullAtClaim = this.fullProjects();
        if (only === undefined) this.earliestDueAgain = Infinity;
        let sawAllDue = false;
        try {
          ({ rows: claimed, sawAllDue } = await claimDueDeliveries(this.options.sql, {
            limit: free,
            perProject: this.options.maxPerProject,
            busy: this.busyProjects.counts,
            leaseMs: this.leaseMs,
            onlyProjects: only,
          }));
          failures = 0;
          this.options.onClaim?.({ claimed: claimed.length, scope: only === undefined ? 'all' : 'freed_projects' });
        } catch (err) {
          failures += 1;
          // Postgres unreachable: a failed claim costs nothing (refused at once), and a backoff grown
          // during the outage (every reservation the consumer gives back wakes a claim) would keep
          // due deliveries waiting for up to 10 s after it ends.
          const maxMs = isDatabaseUnavailableError(err) ? DATABASE_RETRY_MAX_MS : 10_000;
          const retryInMs = Math.min(maxMs, 100 * 2 ** Math.min(failures, 7));
          this.logger.warn({ err, retryInMs }, 'delivery worker: claim failed; retrying');
          await this.sleep(retryInMs);
          continue;
        }
        for (const row of claimed) this.launch(row);
        if (only !== undefined && sawAllDue) {
          // The walk saw every due delivery of these projects: one that left a free slot unfilled
          // has nothing more due here (another replica may hold the rest; they are taken).
          for (const [projectId, slots] of freeSlots) if (claimed.filter((row) => row.project_id === projectId).length < slots) this.mayHaveQueued.delete(projectId);
        } else if (only === undefined && claimed.length === 0 && this.wakes === wakesBefore) {
          // Nothing for anyone but the projects it passed over, and no new reason to look came
          // meanwhile (a wake() during the claim must not be overwritten by what the claim saw
          // before it): until the next due time or the poll, freed slots claim only for what may be
          // waiting — the projects passed over, and those full now.
          this.mayHaveQueued.clear();
          for (const projectId of [...fullAtClaim, ...this.fullProjects()]) this.mayHaveQueued.add(projectId);
          const idleMs = await this.idleTime();
          // A delivery put back or retried after nextDueAt read the table is in earliestDueAgain.
          if (this.wakes === wakesBefore) this.exhaustedUntil = Math.min(Date.now() + idleMs, this.earliestDueAgain);
        }
      }
      if (!this.running) break;
      if (this.wakeRequested) continue;
      // More may be claimable for other projects (this claim may have filled one's slots)...
      if (only === undefined && claimed.length > 0 && this.inFlight.size + this.reservedSlots < this.options.maxConcurrency) continue;
      // ...or not: asleep until a freed slot, a wake-up, or the known quiet runs out (if it ran out
      // during this claim, a claim over every project now).
      if (this.exhaustedUntil !== 0 && Date.now() >= this.exhaustedUntil) {
        this.exhaustedUntil = 0;
        continue;
      }
      const exhausted = this.exhaustedUntil !== 0;
      const idleMs = exhausted ? Math.max(1, this.exhaustedUntil - Date.now()) : this.options.pollIntervalMs;
      if ((await this.sleep(idleMs)) && Date.now() >= this.exhaustedUntil) this.exhaustedUntil = 0;
    }
  }

  /** How long to sleep when nothing more can be claimed now. */
  private async idleTime(): Promise<number> {
    const poll = this.options.pollIntervalMs;
    if (this.inFlight.size + this.reservedSlots >= this.options.maxConcurrency) return poll; // a finishing attempt wakes us
    try {
      const due = await nextDueAt(this.options.sql, { perProject: this.options.maxPerProject, busy: this.busyProjects.counts });
      if (due === null) return poll;
      return Math.min(poll, Math.max(0, due.getTime() - Date.now()) + 2);
    } catch {
      return poll;
    }
  }

  /** Sleeps `ms` unless woken first; true when the time ran out. */
  private sleep(ms: number): Promise<boolean> {
    if (!this.running || ms <= 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (timedOut: boolean) => {
        clearTimeout(timer);
        this.interruptSleep = undefined;
        resolve(timedOut);
      };
      const timer = setTimeout(() => done(true), ms);
      this.interruptSleep = () => done(false);
      if (this.wakeRequested) done(false);
    });
  }

  private launch(row: DeliveryRow, options: { context?: ProjectContext; projectSlotTaken?: boolean; hostHeld?: string } = {}): void {
    if (!options.projectSlotTaken) this.busyProjects.take(row.project_id);
    const slot: HostSlot = { host: options.hostHeld };
    const work = this.deliver(row, slot, options.context)
      .catch((err: unknown) => this.logger.error({ err, deliveryId: row.id }, 'delivery worker: attempt could not be recorded; it is retried after the lease'))
      .finally(() => {
        this.inFlight.delete(row.id);
        this.busyProjects.give(row.project_id);
        if (slot.host !== undefined) this.busyHosts.give(slot.host);
        this.slotFreed(row.project_id);
      });
    this.inFlight.set(row.id, work);
  }

  /** Takes a slot of the host `url` names for `slot`, unless it already holds one; false when the host is full. */
  private holdHost(slot: HostSlot, url: string): boolean {
    if (slot.host !== undefined) return true;
    const host = destinationHost(url);
    // An unparsable URL is refused by the SSRF guard during the attempt: nothing reaches a host.
    if (host === undefined) return true;
    if (this.busyHosts.count(host) >= this.options.maxPerHost) return false;
    this.busyHosts.take(host);
    slot.host = host;
    return true;
  }

  /** One attempt; `fresh` is the project context when the caller read it from auth just now. */
  private async deliver(row: DeliveryRow, slot: HostSlot, fresh?: ProjectContext): Promise<void> {
    const token = row.lease_token;
    if (token === null) throw new Error(`delivery ${row.id} was claimed without a lease token`);
    const log = this.logger.child({ deliveryId: row.id, eventId: row.event_id, eventType: row.event_type, projectId: row.project_id });

    let secrets: SigningSecrets | undefined;
    let projectKnown = true;
    // Every attempt goes to the project's webhook URL now: a merchant who fixes a broken URL gets
    // the pending retries there, not at the old address.
    let url: string | undefined = row.url;
    try {
      const project = fresh ?? (await this.options.projects.get(row.project_id));
      if (project === undefined) projectKnown = false;
      else {
        secrets = signingSecrets(project, new Date());
        url = project.webhookUrl;
      }
    } catch (err) {
      // Not an attempt: nothing was sent. Due again shortly, the count untouched.
      log.warn({ err }, 'delivery worker: auth unreachable; the attempt is postponed');
      const dueAt = new Date(Date.now() + 1_000);
      await releaseLease(this.options.sql, row.id, token, dueAt);
      this.dueAgainAt(dueAt);
      return;
    }

    if (projectKnown && url !== undefined && !this.holdHost(slot, url)) {
      // The host the project's URL names has every slot in use (other projects may share it):
      // not an attempt; due again shortly, while the other hosts' deliveries go.
      const dueAt = new Date(Date.now() + HOST_BUSY_RETRY_MS);
      await releaseLease(this.options.sql, row.id, token, dueAt);
      this.dueAgainAt(dueAt);
      return;
    }
    const record = !projectKnown || secrets === undefined ? projectGone(row) : url === undefined ? noWebhookUrl() : await this.attempt({ ...row, url }, secrets);
    const sentTo = url ?? row.url;
    const outcome = classifyAttempt(record.result, this.options.timeoutMs);
    const delivery = toDomain(row);
    const event = deliveryEventForAttempt({
      delivery,
      outcome,
      schedule: this.options.schedule,
      at: new Date(),
      random: this.options.random,
    });
    const next = applyDeliveryEvent(delivery, event);
    const attemptNumber = row.attempt_count + 1;
    const success = outcome.result === 'success';
    // The attempt's log says why an answer did not count when its status alone does not (a
    // redirect, which is never followed); a transport failure says its own error.
    const attemptError = record.error ?? (outcome.result === 'retryable_failure' && outcome.detail !== `HTTP ${record.responseStatus}` ? outcome.detail : null);

    const ended: EndedAttempt = {
      delivery: row,
      leaseToken: token,
      success,
      update: {
        url: sentTo,
        status: next.state,
        attemptCount: next.attemptCount,
        nextAttemptAt: next.nextAttemptAt,
        finishedAt: next.finishedAt,
        lastAttemptAt: record.attemptedAt,
        lastResponseStatus: record.responseStatus,
        lastError: success ? null : record.error ?? (outcome.result === 'retryable_failure' ? outcome.detail : null),
      },
      attempt: {
        attemptNumber,
        attemptedAt: record.attemptedAt,
        url: sentTo,
        requestHeaders: record.headers,
        requestBody: row.body,
        responseStatus: record.responseStatus,
        responseBodyExcerpt: record.excerpt,
        durationMs: record.durationMs,
        error: attemptError,
      },
    };
    // One statement (docs/webhook-delivery.md#recording); a transaction only when the delivery gave
    // up, for its notifier.webhook_delivery_failed event.
    const recorded =
      next.state === 'failed'
        ? await eventTransaction(this.options.sql, async (tx) => {
            const result = await recordAttempt(tx, ended);
            if (result.ours) await enqueueEvent(tx, deliveryFailedEvent(row, sentTo, next, record));
            return result;
          })
        : await recordAttempt(this.options.sql, ended);
    const kept = recorded.ours;

    // Its retry is claimed here or by any replica when it comes due (a sleeping worker must wake for it).
    if (kept && next.state === 'pending' && next.nextAttemptAt !== null) this.dueAgainAt(next.nextAttemptAt);
    this.options.onAttempt?.({ delivery: row, outcome: success ? 'success' : 'failure', durationMs: record.durationMs });
    const fields = { attempt: attemptNumber, status: record.responseStatus, durationMs: record.durationMs };
    if (recorded.deliveredMeanwhile) log.info(fields, 'webhook attempt ended after another delivery of its event had delivered it; attempt logged');
    else if (!kept) log.warn(fields, 'delivery worker: lease was lost during the attempt (another replica took it over); attempt logged only');
    else if (success) log.info(fields, 'webhook delivered');
    else if (next.state === 'failed') log.warn({ ...fields, error: record.error }, 'webhook delivery failed: retries exhausted');
    else log.info({ ...fields, error: record.error, nextAttemptAt: next.nextAttemptAt }, 'webhook attempt failed; retry scheduled');
  }

  private async attempt(row: DeliveryRow, secrets: SigningSecrets): Promise<AttemptRecord> {
    const attemptedAt = new Date();
    const started = performance.now();
    let headers: Record<string, string> = {};
    try {
      headers = webhookDeliveryHeaders({ id: row.event_id, eventType: row.event_type, timestamp: attemptedAt, body: row.body, secrets });
    } catch (err) {
      return failed(attemptedAt, headers, `cannot sign: ${err instanceof Error ? err.message : String(err)}`);
    }
    // Resolved and checked before EVERY attempt (DNS may have changed since configuration).
    const verdict = await this.options.guard.vetDestination(row.url);
    if (!verdict.ok) {
      const error = `destination refused (${verdict.reason}): ${verdict.message}`;
      return {
        attemptedAt,
        headers,
        result: { kind: 'refused_by_ssrf_guard', reason: verdict.message },
        responseStatus: null,
        excerpt: '',
        durationMs: Math.round(performance.now() - started),
        error,
      };
    }
    const beforePost = Math.round(performance.now() - started);
    const remaining = Math.max(1, this.options.timeoutMs - beforePost);
    const http: HttpAttempt = await this.options.sender.post({ verdict, headers, body: row.body, timeoutMs: remaining, limitMs: this.options.timeoutMs });
    const durationMs = Math.round(performance.now() - started);
    switch (http.kind) {
      case 'response': {
        // The answer's time is the sender's (its status's, when the body trickled past the limit:
        // it counts), not when the sender gave up reading.
        const answeredMs = beforePost + http.durationMs;
        return {
          attemptedAt,
          headers,
          result: { kind: 'response', status: http.status, durationMs: answeredMs },
          responseStatus: http.status,
          excerpt: http.bodyExcerpt,
          durationMs: answeredMs,
          error: null,
        };
      }
      case 'timeout':
        return { attemptedAt, headers, result: { kind: 'timeout', durationMs }, responseStatus: null, excerpt: '', durationMs, error: http.error };
      case 'connection_error':
        return {
          attemptedAt,
          headers,
          result: { kind: 'connection_error', durationMs, error: http.error },
          responseStatus: null,
          excerpt: '',
          durationMs,
          error: http.error,
        };
    }
  }
}

/** Longest backoff after a claim failed because Postgres is unreachable. */
const DATABASE_RETRY_MAX_MS = 1_000;

/** How long a delivery whose host has no free slot waits before it is looked at again. */
const HOST_BUSY_RETRY_MS = 500;

/** The host slot an attempt holds, once it knows the URL it calls. */
interface HostSlot {
  host: string | undefined;
}

/** The event a delivery that gave up leaves for the other services (the merchant's email). */
function deliveryFailedEvent(row: DeliveryRow, url: string, next: WebhookDelivery, record: AttemptRecord): NewEvent {
  return {
    type: WEBHOOK_DELIVERY_FAILED,
    key: row.id,
    payload: toJson(
      WebhookDeliveryFailedSchema,
      create(WebhookDeliveryFailedSchema, {
        deliveryId: row.id,
        projectId: row.project_id,
        eventId: row.event_id,
        eventType: row.event_type,
        url,
        attemptCount: next.attemptCount,
        lastResponseStatus: record.responseStatus ?? undefined,
        lastError: record.responseStatus === null ? (record.error ?? undefined) : undefined,
        failedAt: timestampFromDate(next.finishedAt ?? new Date()),
      }),
    ),
  };
}

function failed(attemptedAt: Date, headers: Record<string, string>, error: string): AttemptRecord {
  return { attemptedAt, headers, result: { kind: 'connection_error', durationMs: 0, error }, responseStatus: null, excerpt: '', durationMs: 0, error };
}

function projectGone(row: DeliveryRow): AttemptRecord {
  return failed(new Date(), {}, `project ${row.project_id} no longer exists: nothing was sent`);
}

function noWebhookUrl(): AttemptRecord {
  return failed(new Date(), {}, 'the project has no webhook URL any more: nothing was sent');
}

function toDomain(row: DeliveryRow): WebhookDelivery {
  return {
    id: row.id,
    projectId: row.project_id,
    eventId: row.event_id,
    eventType: row.event_type,
    state: row.status,
    attemptCount: row.attempt_count,
    nextAttemptAt: row.next_attempt_at,
    lastAttemptAt: row.last_attempt_at,
    redeliveryOf: row.redelivery_of,
    createdAt: row.created_at,
    finishedAt: row.finished_at,
  };
}
