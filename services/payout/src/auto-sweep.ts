/**
 * Auto-sweep (services/payout/README.md#auto-sweep): the merchant's rules per
 * currency, set with an emailed code like a payout, and the trigger: when a LIVE project's available
 * balance reaches its rule's threshold, a verified payout of that balance to the rule's destination
 * (origin auto_sweep) is created in the transaction that changed the balance, under the balance
 * row's lock, so concurrent credits cannot create two. Sandbox rules are kept and never acted on
 * (the seed: sandbox invoices "ignore auto-sweep configuration").
 */
import { randomUUID } from 'node:crypto';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import { enforceRateLimit, enqueueEvent, errors, eventTransaction, PeriodicBatchWorker, requireValid, serviceError, type EventTransaction, type Logger, type RateLimitPolicy, type RateLimitStore, type Sql } from '@coinvoice/runtime';
import { formatPlain } from '@coinvoice/domain/money';
import { environmentFromProto, environmentToProto, type ProjectEnvironment } from '@coinvoice/domain/environment';
import type { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type {
  AutoSweepConfigSchema,
  GetAutoSweepRequest,
  SetAutoSweepRequest,
  VerifyAutoSweepRequest,
} from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { planAutoSweep, sweepAmount, validateAutoSweepConfig, validateVerifyAutoSweep, type AutoSweepRule } from './domain/auto-sweep';
import { CODE_MAX_ATTEMPTS, codeMatches, issueCode } from './domain/code';
import { storedMethod } from './domain/requests';
import { payoutVerifiedEvent } from './events/payout-events';
import {
  activeRules,
  deleteChange,
  insertSweepPayout,
  liveRule,
  lockAutoSweep,
  markRuleChecked,
  pendingChange,
  removeRules,
  removeUncheckedRule,
  uncheckedRules,
  replaceChange,
  upsertRules,
  useChangeAttempt,
  type AutoSweepChangeRow,
} from './store/auto-sweep';
import { hold, lockBalance, type BalanceKey } from './store/ledger';
import type { PayoutRow } from './store/payouts';
import { checkUuid, RequestFields } from '@coinvoice/runtime';
import { checkEnvironment } from '@coinvoice/domain/project-network';
import { refuseHouseDestination, type HouseAddressLookup } from './house-addresses';
import type { PayoutMinimums } from './domain/requests';

/** The note of a sweep payout, shown to the merchant in the history. */
export const AUTO_SWEEP_NOTE = 'auto-sweep';

/**
 * Sweeps the balance `key` when its rule says so: inside the caller's transaction, which has
 * already changed (and so locked) the balance row or locks it here. Returns the payout created, if any.
 */
export async function sweepIfDue(tx: EventTransaction, key: BalanceKey): Promise<PayoutRow | undefined> {
  if (key.environment !== 'live') return undefined;
  const rule = await liveRule(tx, key.projectId, key.currency, key.network);
  if (!rule) return undefined;
  // The lock every balance change takes first: concurrent credits see each other's sweep.
  const balance = await lockBalance(tx, key);
  if (!balance) return undefined;
  const amount = sweepAmount(balance.available, rule.threshold, storedMethod(key.currency, key.network));
  if (amount === undefined) return undefined;
  const payoutId = randomUUID();
  const held = await hold(tx, key, payoutId, amount);
  if (!held.ok) throw new Error(`auto-sweep of ${amount} ${key.currency} exceeds the locked available balance ${held.available}`);
  const payout = await insertSweepPayout(tx, { id: payoutId, projectId: key.projectId, amount, currency: key.currency, network: key.network, address: rule.address, note: AUTO_SWEEP_NOTE });
  // Created verified: it never awaited a code, so the one event is payout.verified (docs/webhook-events.md).
  await enqueueEvent(tx, payoutVerifiedEvent(payout));
  return payout;
}

export interface AutoSweepDeps {
  sql: Sql;
  notifier: Pick<Client<typeof NotifierService>, 'sendAutoSweepVerificationEmail'>;
  logger: Logger;
  codeTtlMs: number;
  /** Codes are secrets: checks and issued codes are counted per project, as for payouts (docs/architecture.md#rate-limits). */
  rateLimits: { store: RateLimitStore; verifyPerProject: RateLimitPolicy; codePerProject: RateLimitPolicy };
  /** The merchant's email for the project (auth), checked against the environment the caller named. */
  merchantEmail(scope: { projectId: string; environment: ProjectEnvironment }): Promise<string>;
  /** Told of every sweep payout created outside the ledger consumer (metrics, logs). */
  onSwept?: (payout: PayoutRow) => void;
  /** A destination coinvoice holds itself is refused (docs/treasury.md#house-addresses). */
  houseAddress: HouseAddressLookup;
  /** PAYOUT_MIN_<CODE>: a live rule's threshold is at least the smallest live payout. */
  liveMinimums: PayoutMinimums;
}

/** What a verification attempt decided; errors are thrown only after its transaction committed. */
type VerifyOutcome = { kind: 'verified'; environment: ProjectEnvironment; swept: PayoutRow[] } | { kind: 'wrong_code'; attemptsLeft: number } | { kind: 'attempts_exhausted' } | { kind: 'expired' } | { kind: 'none' };

export class AutoSweepHandlers {
  constructor(private readonly deps: AutoSweepDeps) {}

  async get(req: GetAutoSweepRequest) {
    const fields = new RequestFields();
    const projectId = fields.take('projectId', checkUuid(req.projectId));
    const environment = fields.take('environment', checkEnvironment(environmentFromProto(req.environment)));
    const scope = requireValid(fields.result(() => ({ projectId: projectId!, environment: environment! })));
    return { config: await this.config(this.deps.sql, scope) };
  }

  async set(req: SetAutoSweepRequest) {
    const request = requireValid(
      validateAutoSweepConfig({ projectId: req.projectId, environment: environmentFromProto(req.environment), entries: req.entries, liveMinimums: this.deps.liveMinimums }),
    );
    const scope = { projectId: request.projectId, environment: request.environment };
    const active = await activeRules(this.deps.sql, request.projectId);
    const { confirm } = planAutoSweep(active, request.rules);
    const needsCode = confirm.length > 0;
    if (needsCode) await enforceRateLimit(this.deps.rateLimits.store, this.deps.rateLimits.codePerProject, request.projectId.toLowerCase());
    // A new destination only (one already confirmed was checked when it was set), after the limit
    // counted the request: whether an address is coinvoice's is asked at the limit's rate only.
    for (const rule of confirm) {
      const at = req.entries.findIndex((entry) => typeof entry.address === 'string' && entry.address.trim().toLowerCase() === rule.address.toLowerCase());
      await refuseHouseDestination(this.deps.houseAddress, rule.address, `entries[${Math.max(at, 0)}].address`);
    }
    // Auth before the transaction: a slow call must not hold locks.
    const email = needsCode ? await this.deps.merchantEmail(scope) : undefined;
    const swept: PayoutRow[] = [];
    const config = await eventTransaction(this.deps.sql, async (tx) => {
      await lockAutoSweep(tx, request.projectId);
      // Planned again under the lock: another PUT may have changed the rules meanwhile.
      const plan = planAutoSweep(await activeRules(tx, request.projectId), request.rules);
      await removeRules(tx, request.projectId, plan.remove);
      await upsertRules(tx, request.projectId, request.environment, plan.update);
      // The PUT is the whole desired configuration: an earlier change awaiting its code is replaced.
      await deleteChange(tx, request.projectId);
      if (plan.confirm.length > 0) {
        if (email === undefined) throw errors.conflict('auto_sweep_changed', 'the auto-sweep configuration changed during the request; send it again');
        const id = randomUUID();
        const issued = issueCode(id);
        const change = await replaceChange(tx, {
          projectId: request.projectId,
          id,
          environment: request.environment,
          entries: plan.confirm,
          codeHash: issued.hash,
          codeSalt: issued.salt,
          codeTtlMs: this.deps.codeTtlMs,
          attempts: CODE_MAX_ATTEMPTS,
        });
        // Last, inside the transaction: if the email cannot be sent the change never existed.
        await this.emailCode(change, email, issued.code);
      }
      // A lower threshold may already be reached.
      for (const rule of plan.update) {
        const payout = await sweepIfDue(tx, { ...scope, currency: rule.currency, network: rule.network });
        if (payout) swept.push(payout);
      }
      return this.config(tx, scope);
    });
    this.logSwept(swept);
    this.deps.logger.info({ projectId: request.projectId, rules: config.entries?.length ?? 0, pendingChange: config.pendingChange !== undefined }, 'auto-sweep configuration set');
    return { config };
  }

  async verify(req: VerifyAutoSweepRequest) {
    const verify = requireValid(validateVerifyAutoSweep(req));
    await enforceRateLimit(this.deps.rateLimits.store, this.deps.rateLimits.verifyPerProject, verify.projectId.toLowerCase());
    const outcome = await eventTransaction(this.deps.sql, async (tx): Promise<VerifyOutcome> => {
      await lockAutoSweep(tx, verify.projectId);
      const change = await pendingChange(tx, verify.projectId, { lock: true });
      if (!change) return { kind: 'none' };
      const [clock] = await tx<{ now: Date }[]>`select now() as now`;
      if (change.code_expires_at.getTime() <= clock!.now.getTime()) {
        await deleteChange(tx, verify.projectId);
        return { kind: 'expired' };
      }
      if (codeMatches(change.id, verify.code, change.code_salt, change.code_hash)) {
        await upsertRules(tx, verify.projectId, change.environment, change.entries);
        await deleteChange(tx, verify.projectId);
        const swept: PayoutRow[] = [];
        // A balance already above a new threshold is swept now, not at the next credit.
        for (const rule of change.entries) {
          // A change stored before networks names none: its currency's default network (migration 0500 wrote it).
          const payout = await sweepIfDue(tx, { projectId: verify.projectId, environment: change.environment, currency: rule.currency, network: rule.network });
          if (payout) swept.push(payout);
        }
        return { kind: 'verified', environment: change.environment, swept };
      }
      const attemptsLeft = await useChangeAttempt(tx, verify.projectId);
      if (attemptsLeft > 0) return { kind: 'wrong_code', attemptsLeft };
      await deleteChange(tx, verify.projectId);
      return { kind: 'attempts_exhausted' };
    });
    const log = this.deps.logger.child({ projectId: verify.projectId });
    switch (outcome.kind) {
      case 'none':
        throw errors.conflict('auto_sweep_change_not_pending', 'no auto-sweep change awaits a code: set the configuration first');
      case 'expired':
        log.info('auto-sweep code expired: the change was discarded');
        throw errors.conflict('verification_code_expired', 'the verification code has expired: the change was discarded; set the configuration again');
      case 'wrong_code':
        log.info({ attemptsLeft: outcome.attemptsLeft }, 'wrong auto-sweep verification code');
        throw serviceError(Code.InvalidArgument, 'invalid_verification_code', `the verification code is wrong; ${plural(outcome.attemptsLeft)} left before the change is discarded`, [
          { field: 'code', message: `is wrong; ${plural(outcome.attemptsLeft)} left` },
        ]);
      case 'attempts_exhausted':
        log.warn('wrong auto-sweep verification code, no attempts left: the change was discarded');
        throw serviceError(Code.InvalidArgument, 'invalid_verification_code', 'the verification code is wrong and no attempts are left: the change was discarded', [
          { field: 'code', message: 'is wrong; no attempts left, the change was discarded' },
        ]);
      case 'verified':
        this.logSwept(outcome.swept);
        log.info('auto-sweep destinations confirmed and active');
        return { config: await this.config(this.deps.sql, { projectId: verify.projectId, environment: outcome.environment }) };
    }
  }

  private logSwept(swept: PayoutRow[]): void {
    for (const payout of swept) announceSweep(payout, this.deps.logger, this.deps.onSwept);
  }

  private async config(sql: Sql | EventTransaction, scope: { projectId: string; environment: ProjectEnvironment }): Promise<MessageInitShape<typeof AutoSweepConfigSchema>> {
    const rules = await activeRules(sql, scope.projectId);
    const change = await pendingChange(sql, scope.projectId);
    const [clock] = await sql<{ now: Date }[]>`select now() as now`;
    // An expired change is as good as gone (verify discards it).
    const live = change && change.code_expires_at.getTime() > clock!.now.getTime() ? change : undefined;
    return configInit(scope, rules, live);
  }

  private async emailCode(change: AutoSweepChangeRow, email: string, code: string): Promise<void> {
    try {
      await this.deps.notifier.sendAutoSweepVerificationEmail({
        projectId: change.project_id,
        environment: change.environment,
        email,
        code,
        expiresAt: timestampFromDate(change.code_expires_at),
        destinations: change.entries.map((r) => ({ currency: r.currency, address: r.address, threshold: r.threshold })),
      });
    } catch (err) {
      this.deps.logger.warn({ projectId: change.project_id, error: ConnectError.from(err).rawMessage }, 'the auto-sweep verification email could not be sent; nothing changed');
      throw serviceError(Code.Unavailable, 'service_unavailable', 'the verification email could not be sent; try again shortly');
    }
  }
}

function configInit(scope: { projectId: string; environment: ProjectEnvironment }, rules: AutoSweepRule[], change: AutoSweepChangeRow | undefined) {
  return {
    projectId: scope.projectId,
    environment: environmentToProto(scope.environment),
    entries: rules.map(ruleInit),
    pendingChange: change && {
      entries: change.entries.map(ruleInit),
      expiresAt: timestampFromDate(change.code_expires_at),
      attemptsLeft: change.code_attempts_left,
    },
  };
}

function ruleInit(rule: AutoSweepRule) {
  return { currency: rule.currency, network: rule.network, address: rule.address, threshold: formatPlain(rule.threshold) };
}

function plural(n: number): string {
  return n === 1 ? '1 attempt' : `${n} attempts`;
}

/** A sweep payout created outside the ledger consumer: told (metrics) and logged. */
function announceSweep(payout: PayoutRow, logger: Logger, onSwept: ((payout: PayoutRow) => void) | undefined): void {
  onSwept?.(payout);
  logger.info({ payoutId: payout.id, projectId: payout.project_id, currency: payout.currency, network: payout.network, amount: payout.amount }, 'auto-sweep payout created');
}

export interface AutoSweepDestinationCheckOptions {
  sql: Sql;
  logger: Logger;
  houseAddress: HouseAddressLookup;
  intervalMs: number;
  batchSize: number;
  onSwept?: (payout: PayoutRow) => void;
}

/**
 * Rules stored before destinations were checked against coinvoice's own addresses
 * (docs/treasury.md#house-addresses) sweep nothing (`liveRule`) until this worker has looked at them:
 * a rule whose destination is coinvoice's is removed — its sweeps would strand the coins — and any
 * other is marked checked and swept at once if its balance is already over the threshold. The
 * invoice service unreachable, the round fails and is retried at the next interval.
 */
export class AutoSweepDestinationCheck extends PeriodicBatchWorker {
  constructor(private readonly options: AutoSweepDestinationCheckOptions) {
    super({ ...options, component: 'auto-sweep-destination-check', failureMessage: 'checking stored auto-sweep destinations failed; retrying at the next interval' });
  }

  async processBatch(): Promise<number> {
    const rules = await uncheckedRules(this.options.sql, this.options.batchSize);
    for (const rule of rules) {
      // Asked outside any transaction: a slow call must not hold the rule's or the balance's lock.
      const house = await this.options.houseAddress(rule.address);
      const swept = await eventTransaction(this.options.sql, async (tx) => {
        if (house !== undefined) {
          if (await removeUncheckedRule(tx, rule)) {
            this.logger.warn(
              { projectId: rule.projectId, environment: rule.environment, currency: rule.currency, network: rule.network, address: rule.address, kind: house },
              'auto-sweep rule removed: its destination is an address coinvoice holds, where swept coins would be credited to no one',
            );
          }
          return undefined;
        }
        if (!(await markRuleChecked(tx, rule))) return undefined;
        return sweepIfDue(tx, { projectId: rule.projectId, environment: rule.environment, currency: rule.currency, network: rule.network });
      });
      if (swept) announceSweep(swept, this.logger, this.options.onSwept);
    }
    return rules.length;
  }
}
