/**
 * The chain families as the invoice service's watcher sees them: their settings as one table, and
 * per chain the source a `watch <chain>` process reads (family.ts `sources`).
 */
import type { ConfigOf } from '@coinvoice/runtime';
import type { Chain } from './coin';
import { CHAIN_FAMILIES } from './currencies';
import { evmFamily } from './evm/family';
import type { ChainSource } from './family';
import { tronFamily } from './tron/family';
import { utxoFamily } from './utxo/family';

/** Every family's node and watcher settings (docs/architecture.md#live-payments), read by the invoice service's every role. */
export const chainWatcherSettings = {
  ...evmFamily.watcherSettings,
  ...utxoFamily.watcherSettings,
  ...tronFamily.watcherSettings,
} as const;

export type ChainWatcherConfig = ConfigOf<typeof chainWatcherSettings>;

/** Per chain, how its watcher reads it under `config`. */
export function chainSources(config: ChainWatcherConfig): Partial<Record<Chain, ChainSource>> {
  return { ...evmFamily.sources(config), ...utxoFamily.sources(config), ...tronFamily.sources(config) };
}

/** The chains with a watcher (`invoice watch <chain>`), in the order the settings list them: the EVM networks of the registry, bitcoin, litecoin, tron. */
export const WATCHED_CHAINS: readonly Chain[] = Object.keys({
  ...evmFamily.defaultConfirmations,
  ...utxoFamily.defaultConfirmations,
  ...tronFamily.defaultConfirmations,
}) as Chain[];

export function isChainName(value: unknown): value is Chain {
  return typeof value === 'string' && (WATCHED_CHAINS as readonly string[]).includes(value);
}

/** The confirmations a new live invoice on `chain` will need: its family's policy under `config`. */
export function confirmationsRequired(chain: Chain, config: ChainWatcherConfig): number {
  const source = chainSources(config)[chain];
  if (source) return source.confirmations;
  const family = CHAIN_FAMILIES.find((f) => f.defaultConfirmations[chain] !== undefined);
  const fallback = family?.defaultConfirmations[chain];
  if (fallback === undefined) throw new Error(`no confirmation policy for ${chain}`);
  return fallback;
}
