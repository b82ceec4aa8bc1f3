/** The Tron family's coin: TRX, base58check addresses over the Ethereum key hash. */
import type { CryptoCurrency } from '../coin';

export const TRX: CryptoCurrency = {
  kind: 'crypto',
  code: 'TRX',
  name: 'Tron',
  chain: 'tron',
  baseUnitDecimals: 6,
  amountDecimals: 6,
  addressFormat: 'tron-base58check',
  bip44CoinType: 195,
  derivationPurpose: 44,
  uriScheme: 'tron',
};

/** First byte of every Tron address payload (mainnet and testnets alike). */
export const TRON_ADDRESS_PREFIX = 0x41;
