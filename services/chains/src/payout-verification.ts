/**
 * The chain families as the payout service sees them: the settings of their nodes, and one check
 * of an operator's Complete that hands each payout to its chain's check (payout-check.ts).
 */
import type { ConfigOf } from '@coinvoice/runtime';
import { evmFamily } from './evm/family';
import { PayoutChainChecks } from './payout-check';
import { tronFamily } from './tron/family';
import { utxoFamily } from './utxo/family';

/** Every family's node settings (the same as the invoice watchers'; empty URL: that chain's payouts are not checked). */
export const payoutCheckSettings = {
  ...evmFamily.payoutSettings,
  ...utxoFamily.payoutSettings,
  ...tronFamily.payoutSettings,
} as const;

/** The on-chain checks of Complete, one per chain whose node is configured; undefined when none is. */
export function payoutChainCheck(config: ConfigOf<typeof payoutCheckSettings>): PayoutChainChecks | undefined {
  const checks = new PayoutChainChecks({ ...evmFamily.payoutChecks(config), ...utxoFamily.payoutChecks(config), ...tronFamily.payoutChecks(config) });
  return checks.configured ? checks : undefined;
}
