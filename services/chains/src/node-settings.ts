/** Setting shapes the chain families share for their nodes (environment variables, see family.ts). */
import { setting, type Setting } from '@coinvoice/runtime';

/** A node's URL, or empty for "not configured"; its password is never echoed. */
export function optionalNodeUrl(): Setting<string> {
  const url = setting.url(['http:', 'https:']);
  return { ...url, expected: `${url.expected}, or empty`, default: '', parse: (raw) => (raw === '' ? '' : url.parse(raw)) };
}

/** One request to an Esplora or Tron source (the UTXO and Tron families share it). */
export const sourceTimeoutSettings = {
  CHAIN_SOURCE_TIMEOUT_MS: setting.int({ default: 10_000, min: 100, max: 120_000 }),
} as const;

/** Blocks per transaction while an Esplora or Tron watcher backfills (each block is one or more requests). */
export const HTTP_SOURCE_BATCH_BLOCKS = 10;
