/**
 * The auto-sweep rules (services/payout/README.md#auto-sweep): a project's
 * configuration per currency (destination + threshold), checked like a payout's address and
 * amount, and the amount a sweep pays out. Nothing here does I/O.
 */
import type { ProjectEnvironment } from '@coinvoice/domain/environment';
import { checkEnvironment, networkOf } from '@coinvoice/domain/project-network';
import { validateAddress } from '@coinvoice/chains/addresses';
import type { CryptoCurrency } from '@coinvoice/chains/coin';
import { findCryptoCurrency, minimumAmount } from '@coinvoice/chains/currencies';
import { Decimal, formatPlain, Rounding } from '@coinvoice/domain/money';
import { checkUuid, fail, pass, RequestFields, type Check, type Validated } from '@coinvoice/runtime';
import { checkPayoutAmount } from './requests';
import { isWellFormedCode } from './code';

/** One currency's rule, canonical: the coin's code, the canonical address, the threshold as a plain decimal. */
export interface AutoSweepRule {
  currency: string;
  address: string;
  threshold: string;
}

export interface AutoSweepConfigRequest {
  projectId: string;
  environment: ProjectEnvironment;
  rules: AutoSweepRule[];
}

/** At most one rule per supported payout currency. */
const MAX_RULES = 16;

/**
 * The whole desired configuration. Violations name `entries[i].field` (the public body's path).
 * The threshold is checked like a payout amount (> 0, the coin's decimals, 12 integer digits):
 * a sweep pays out at least the threshold, so it must itself be a valid payout.
 */
export function validateAutoSweepConfig(input: { projectId?: unknown; environment?: unknown; entries: readonly { currency?: unknown; address?: unknown; threshold?: unknown }[] }): Validated<AutoSweepConfigRequest> {
  const fields = new RequestFields();
  const projectId = fields.take('projectId', checkUuid(input.projectId));
  const environment = fields.take('environment', checkEnvironment(input.environment));
  const rules: AutoSweepRule[] = [];
  if (input.entries.length > MAX_RULES) fields.take('entries', fail(`must have at most ${MAX_RULES} entries`));
  const seen = new Set<string>();
  input.entries.slice(0, MAX_RULES).forEach((entry, i) => {
    const at = `entries[${i}]`;
    const coin = fields.take(`${at}.currency`, checkCurrency(entry.currency));
    if (coin && seen.has(coin.code)) {
      fields.take(`${at}.currency`, fail(`names ${coin.code} twice: one entry per currency`));
      return;
    }
    if (coin) seen.add(coin.code);
    const address = fields.take(`${at}.address`, checkDestination(entry.address, coin, environment));
    const threshold = fields.take(`${at}.threshold`, checkPayoutAmount(entry.threshold, coin));
    if (coin && address && threshold) rules.push({ currency: coin.code, address, threshold: formatPlain(threshold) });
  });
  return fields.result(() => ({ projectId: projectId!, environment: environment!, rules: rules.sort((a, b) => a.currency.localeCompare(b.currency)) }));
}

function checkCurrency(raw: unknown): Check<CryptoCurrency> {
  if (raw === undefined || raw === null || raw === '') return fail('is required');
  return findCryptoCurrency(raw);
}

function checkDestination(raw: unknown, coin: CryptoCurrency | undefined, environment: ProjectEnvironment | undefined): Check<string> {
  if (raw === undefined || raw === null || raw === '') return fail('is required');
  if (typeof raw !== 'string') return fail('must be a string');
  if (!coin || !environment) return raw.length <= 128 ? pass(raw) : fail('must be at most 128 characters');
  const network = networkOf(environment);
  const checked = validateAddress(coin.code, network, raw);
  return checked.ok ? checked : fail(`is not a valid ${coin.code} ${network} address: it ${checked.reason}`);
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
  /** Currencies whose active rule goes away. */
  remove: string[];
  /** Active rules whose destination stays: the threshold is updated now. */
  update: AutoSweepRule[];
  /** New or changed destinations: activated by the emailed code. */
  confirm: AutoSweepRule[];
}

export function planAutoSweep(active: readonly AutoSweepRule[], desired: readonly AutoSweepRule[]): AutoSweepPlan {
  const activeBy = new Map(active.map((r) => [r.currency, r]));
  const desiredCurrencies = new Set(desired.map((r) => r.currency));
  const plan: AutoSweepPlan = { remove: active.filter((r) => !desiredCurrencies.has(r.currency)).map((r) => r.currency), update: [], confirm: [] };
  for (const rule of desired) {
    const current = activeBy.get(rule.currency);
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
