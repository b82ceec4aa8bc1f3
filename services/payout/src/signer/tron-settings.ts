/**
 * The signer's Tron settings (docs/treasury.md#tron), beside settings.ts's (role.ts loads both).
 * USDT on Tron shares SIGNER_MAX_PAYOUT_USDT and SIGNER_DAILY_LIMIT_USDT with USDT on Ethereum:
 * one dollar exposure per day, whichever chain pays it out (and one daily_totals row, 'USDT').
 */
import { setting } from '@coinvoice/runtime';
import { accountXpubSetting } from '@coinvoice/chains/account-key';
import { tronFamily } from '@coinvoice/chains/tron/family';
import { assetAmountSetting, bigintSetting } from './settings';

/**
 * 50 TRX: a TRC-20 transfer to a new holder costs 130,285 energy, burnt at 210 sun per energy
 * (the 2024–2026 price) ≈ 27.4 TRX, plus ~345 bandwidth ≈ 0.35 TRX; the cap leaves room for one
 * energy price rise while bounding what one signature can burn (docs/treasury.md#tron).
 */
export const DEFAULT_MAX_FEE_LIMIT_SUN = 50_000_000n;

export const tronSignerSettings = {
  /** The invoice service's TRX account key: the seed's m/44'/195'/0' must be it. Empty: Tron is not signed. */
  INVOICE_XPUB_TRX: accountXpubSetting('TRX', 'mainnet'),
  /** The TRC-20 USDT contract a Tron USDT payout calls (the watcher's setting). */
  CHAIN_TRON_USDT_CONTRACT: tronFamily.watcherSettings.CHAIN_TRON_USDT_CONTRACT,
  SIGNER_MAX_PAYOUT_TRX: assetAmountSetting('TRX', '20000'),
  SIGNER_DAILY_LIMIT_TRX: assetAmountSetting('TRX', '200000'),
  /** The largest fee_limit (sun) a TRC-20 call may carry: what one call can burn for energy at most. */
  SIGNER_MAX_FEE_LIMIT_SUN: bigintSetting({ default: DEFAULT_MAX_FEE_LIMIT_SUN.toString(), min: 1n, max: 15_000_000_000n }),
  /**
   * The latest expiration a transaction may carry, from the signer's clock. java-tron refuses
   * expirations more than 24 h after its head block; a short window bounds how long a signed but
   * unbroadcast transaction stays a threat, and how long a payout waits before a re-signature.
   */
  SIGNER_TRON_MAX_EXPIRATION: setting.duration({ default: '10m', minMs: 60_000, maxMs: 24 * 3_600_000 }),
} as const;
