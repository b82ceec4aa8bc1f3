/**
 * The auto-sweep rules (services/payout/README.md#auto-sweep): a project's
 * configuration per currency (destination + threshold), checked like a payout's address and
 * amount, and the amount a sweep pays out. Nothing here does I/O.
 */
import type { ProjectEnvironment } from '@coinvoice/domain/environment';
import { checkEnvironment, networkOf } from '@coinvoice/domain/project-network';
import type { CryptoCurrency } from '@coinvoice/chains/coin';
import { findCryptoCurrency, minimumAmount } from '@coinvoice/chains/currencies';
import { Decimal, formatPlain, Rounding } from '@coinvoice/domain/money';
import { checkUuid, fail, pass, RequestFields, type Check, type Validated } from '@coinvoice/runtime';
import { checkAddress, checkPayoutAmount, checkPayoutNetwork, type PayoutMinimums } from './requests';
import { isWellFormedCode } from './code';

/**
 * One (currency, network)'s rule, canonical: the coin's code, its network (the default network
 * when the entry named none), the canonical address, the threshold as a plain decimal.
 */
export interface AutoSweepRule {
  currency: string;
  network: string;
  address: string;
  threshold: string;
}

export interface AutoSweepConfigRequest {
  projectId: string;
  environment: ProjectEnvironment;
  rules: AutoSweepRule[];
}

/** At most one rule per (currency, network) a project is likely to hold. */
const MAX_RULES = 32;

/**
 * The whole desired configuration. Violations name `entries[i].field` (the public body's path).
 * The threshold is checked like a payout amount (> 0, the coin's decimals, 12 integer digits):
 * a sweep pays out at least the threshold, so it must itself be a valid payout.
 */
export function validateAutoSweepConfig(input: {
  projectId?: unknown;
  environment?: unknown;
  entries: readonly { currency?: unknown; network?: unknown; address?: unknown; threshold?: unknown }[];
  /** PAYOUT_MIN_<CODE>: a live rule's threshold is at least the smallest live payout. */
  liveMinimums?: PayoutMinimums;
}): Validated<AutoSweepConfigRequest> {
  const fields = new RequestFields();
  const projectId = fields.take('projectId', checkUuid(input.projectId));
  const environment = fields.take('environment', checkEnvironment(input.environment));
  const rules: AutoSweepRule[] = [];
  if (input.entries.length > MAX_RULES) fields.take('entries', fail(`must have at most ${MAX_RULES} entries`));
  const seen = new Set<string>();
  input.entries.slice(0, MAX_RULES).forEach((entry, i) => {
    const at = `entries[${i}]`;
    const coin = fields.take(`${at}.currency`, checkCurrency(entry.currency));
    // Empty: the currency's default network (proto AutoSweepEntry.network).
    const method = fields.take(`${at}.network`, checkPayoutNetwork(entry.network, coin));
    if (method && seen.has(ruleKey(method.code, method.chain))) {
      fields.take(`${at}.currency`, fail(`names ${method.code} on ${method.chain} twice: one entry per currency and network`));
      return;
    }
    if (method) seen.add(ruleKey(method.code, method.chain));
    const address = fields.take(`${at}.address`, checkAddress(entry.address, method, environment && networkOf(environment)));
    const threshold = fields.take(`${at}.threshold`, checkPayoutAmount(entry.threshold, method ?? coin, environment === 'live' ? input.liveMinimums : undefined));
    if (method && address && threshold) rules.push({ currency: method.code, network: method.chain, address, threshold: formatPlain(threshold) });
  });
  return fields.result(() => ({ projectId: projectId!, environment: environment!, rules: rules.sort(byRule) }));
}

/** A rule's identity: its (currency, network). */
export function ruleKey(currency: string, network: string): string {
  return `${currency}@${network}`;
}

/** Rules in the order they are listed: by currency, then network. */
export function byRule(a: AutoSweepRule, b: AutoSweepRule): number {
  return a.currency.localeCompare(b.currency) || a.network.localeCompare(b.network);
}

function checkCurrency(raw: unknown): Check<CryptoCurrency> {
  if (raw === undefined || raw === null || raw === '') return fail('is required');
  return findCryptoCurrency(raw);
}

export function validateVerifyAutoSweep(input: { projectId?: unknown; code?: unknown }): Validated<{ projectId: string; code: string }> {
  const fields = new RequestFields();
  const projectId = fields.take('projectId', checkUuid(input.projectId));
  const code = fields.take<string>(
    'code',
    input.code === undefined || input.code === null || input.code === ''
      ? fail('is required')
      : isWellFormedCode(input.code)
        ? pass(input.code)
        : fail('must be the 6-digit code from the email'),
  );
  return fields.result(() => ({ projectId: projectId!, code: code! }));
}

/** What a PUT does: removals and threshold-only changes apply now; new destinations wait for the code. */
export interface AutoSweepPlan {
  /** (currency, network) pairs whose active rule goes away. */
  remove: { currency: string; network: string }[];
  /** Active rules whose destination stays: the threshold is updated now. */
  update: AutoSweepRule[];
  /** New or changed destinations: activated by the emailed code. */
  confirm: AutoSweepRule[];
}

export function planAutoSweep(active: readonly AutoSweepRule[], desired: readonly AutoSweepRule[]): AutoSweepPlan {
  const activeBy = new Map(active.map((r) => [ruleKey(r.currency, r.network), r]));
  const desiredKeys = new Set(desired.map((r) => ruleKey(r.currency, r.network)));
  const plan: AutoSweepPlan = {
    remove: active.filter((r) => !desiredKeys.has(ruleKey(r.currency, r.network))).map((r) => ({ currency: r.currency, network: r.network })),
    update: [],
    confirm: [],
  };
  for (const rule of desired) {
    const current = activeBy.get(ruleKey(rule.currency, rule.network));
    if (current && current.address === rule.address) {
      if (!new Decimal(current.threshold).eq(rule.threshold)) plan.update.push(rule);
    } else {
      plan.confirm.push(rule);
    }
  }
  return plan;
}

/**
 * The payout a sweep creates from `available`: the whole balance, cut to the coin's payout decimals
 * (an ETH balance may hold wei beyond the 8 decimals a payout can carry; the rest stays available),
 * or nothing below the threshold or the chain's dust limit.
 */
export function sweepAmount(available: string, threshold: string, coin: CryptoCurrency): string | undefined {
  const balance = new Decimal(available);
  if (balance.lt(threshold)) return undefined;
  const amount = balance.toDecimalPlaces(coin.amountDecimals, Rounding.down);
  if (amount.lte(0) || amount.lt(minimumAmount(coin))) return undefined;
  return formatPlain(amount);
}
