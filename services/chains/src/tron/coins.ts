/** The Tron family's coins: TRX and the TRC-20 stablecoins, base58check addresses over the Ethereum key hash. */
import type { CryptoCurrency } from '../coin';

export const TRX: CryptoCurrency = {
  kind: 'crypto',
  code: 'TRX',
  name: 'Tron',
  chain: 'tron',
  keyCurrency: 'TRX',
  baseUnitDecimals: 6,
  amountDecimals: 6,
  addressFormat: 'tron-base58check',
  bip44CoinType: 195,
  derivationPurpose: 44,
  uriScheme: 'tron',
};

/** A TRC-20 stablecoin on Tron: held by a Tron account, so its addresses come from the TRX key. */
function trc20(code: 'USDT' | 'USDC', name: string, mainnet: string, testnet: string | null): CryptoCurrency {
  return { ...TRX, code, name, keyCurrency: 'TRX', token: { standard: 'trc20', contract: { mainnet, testnet } } };
}

/**
 * Tether's USD₮ on Tron (6 decimals). The Nile testnet has no Tether deployment: sandbox invoices
 * are paid by simulation.
 */
export const USDT_TRON = trc20('USDT', 'Tether USD (TRC-20)', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', null);
/**
 * Circle's USDC on Tron (6 decimals). Circle ended its support of USDC on Tron in 2024, so it is
 * taken only where an operator configures the contract (CHAIN_TRON_USDC_CONTRACT).
 */
export const USDC_TRON = trc20('USDC', 'USD Coin (TRC-20)', 'TEkxiTehnzSmSe2XqrBj4w32RUN966rdz8', null);

/** First byte of every Tron address payload (mainnet and testnets alike). */
export const TRON_ADDRESS_PREFIX = 0x41;
