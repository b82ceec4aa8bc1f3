/**
 * With a chain node configured, an operator's Complete is checked on chain (services/payout/README.md
 * "Claim before sending"): the transaction must be mined, must have succeeded, and must pay the
 * payout's destination exactly the payout's amount, in base units. An operator who pastes the wrong
 * hash (or the hash of another payout, or of a smaller transfer) is told so instead of debiting the
 * balance.
 *
 * Each chain family knows how its node answers: evm/payout-check.ts (JSON-RPC), utxo/payout-check.ts
 * (Esplora: bitcoin, litecoin), tron/payout-check.ts (full-node HTTP API). Each family module builds
 * its checks (family.ts `payoutChecks`) from the same settings as the invoice service's watchers; a
 * chain without a node setting is not checked (payout-verification.ts puts them together).
 */
import { Code } from '@connectrpc/connect';
import type { Chain, CryptoCurrency } from './coin';
import { Decimal, formatPlain, fromBaseUnits, toBaseUnits } from '@coinvoice/domain/money';

export interface ChainCheckInput {
  /** Lower-case, in the chain's format (checked before). */
  transactionHash: string;
  coin: CryptoCurrency;
  /** The payout's destination and amount (decimal string in the coin's units). */
  address: string;
  amount: string;
}

export type ChainCheckResult = { ok: true } | { ok: false; code: string; reason: string; connectCode: Code };

export interface PayoutChainCheck {
  check(input: ChainCheckInput): Promise<ChainCheckResult>;
}

/** The node could not be asked (down, timed out, or answered something that is not its API). */
export class ChainUnavailable extends Error {}

/** The payout's amount in the coin's base units (wei, satoshi, sun, token units). */
export function payoutBaseUnits(input: ChainCheckInput): bigint {
  return toBaseUnits(new Decimal(input.amount), input.coin.baseUnitDecimals);
}

/** A base-unit amount in the coin's units, for a reason an operator reads. */
export function formatUnits(value: bigint, coin: CryptoCurrency): string {
  return formatPlain(fromBaseUnits(value, coin.baseUnitDecimals));
}

export function notMined(chainName: string): ChainCheckResult {
  return {
    ok: false,
    code: 'transaction_not_found',
    reason: `the ${chainName} node knows no mined transaction with this hash: complete the payout once its transaction is mined`,
    connectCode: Code.FailedPrecondition,
  };
}

export function failedOnChain(how: string): ChainCheckResult {
  return { ok: false, code: 'transaction_failed', reason: `this transaction failed on chain (${how}): it sent nothing`, connectCode: Code.FailedPrecondition };
}

export function mismatch(reason: string): ChainCheckResult {
  return { ok: false, code: 'transaction_mismatch', reason, connectCode: Code.FailedPrecondition };
}

/** The checks per chain; a payout on a chain without one is not checked (no node configured). */
export class PayoutChainChecks implements PayoutChainCheck {
  constructor(private readonly byChain: Partial<Record<Chain, PayoutChainCheck>>) {}

  get configured(): boolean {
    return Object.keys(this.byChain).length > 0;
  }

  async check(input: ChainCheckInput): Promise<ChainCheckResult> {
    const check = this.byChain[input.coin.chain];
    if (!check) return { ok: true };
    try {
      return await check.check(input);
    } catch (err) {
      if (err instanceof ChainUnavailable) {
        return {
          ok: false,
          code: 'chain_unavailable',
          reason: `the ${input.coin.chain} node could not be asked (${err.message}); try again shortly`,
          connectCode: Code.Unavailable,
        };
      }
      throw err;
    }
  }
}

/** A JSON answer of a node over HTTP; a transport failure or a non-JSON answer is ChainUnavailable. */
export async function fetchJson(url: string, init: RequestInit & { timeoutMs: number; notFoundAs?: unknown }): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(init.timeoutMs) });
  } catch (err) {
    throw new ChainUnavailable(err instanceof Error ? err.message : String(err));
  }
  if (res.status === 404 && 'notFoundAs' in init) {
    await res.body?.cancel();
    return init.notFoundAs;
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new ChainUnavailable(`HTTP ${res.status}`);
  }
  const text = await res.text();
  try {
    return JSON.parse(text, exactIntegers) as unknown;
  } catch {
    throw new ChainUnavailable('the answer is not JSON');
  }
}

/**
 * JSON.parse's reviver: an integer past 2^53 (an amount in sun or wei) becomes the bigint its text
 * says, never the nearest double (Node 24 passes the number's source text).
 */
function exactIntegers(_key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value !== 'number' || Number.isSafeInteger(value) || context?.source === undefined || !/^-?\d+$/.test(context.source)) return value;
  return BigInt(context.source);
}

/** A whole number of base units as the node wrote it: a safe integer or a bigint (exactIntegers). */
export function baseUnitsOf(value: unknown): bigint | undefined {
  if (typeof value === 'bigint') return value;
  return Number.isSafeInteger(value) ? BigInt(value as number) : undefined;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
