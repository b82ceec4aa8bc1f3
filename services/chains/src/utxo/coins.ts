/** The UTXO family's coins: Bitcoin and Litecoin, native segwit (BIP84) addresses. */
import type { Network } from '@coinvoice/domain/project-network';
import type { CryptoCurrency } from '../coin';

export const BTC: CryptoCurrency = {
  kind: 'crypto',
  code: 'BTC',
  name: 'Bitcoin',
  chain: 'bitcoin',
  keyCurrency: 'BTC',
  baseUnitDecimals: 8,
  amountDecimals: 8,
  addressFormat: 'p2wpkh',
  bip44CoinType: 0,
  derivationPurpose: 84,
  uriScheme: 'bitcoin',
  dustLimitBaseUnits: 294,
};

export const LTC: CryptoCurrency = {
  kind: 'crypto',
  code: 'LTC',
  name: 'Litecoin',
  chain: 'litecoin',
  keyCurrency: 'LTC',
  baseUnitDecimals: 8,
  amountDecimals: 8,
  addressFormat: 'p2wpkh',
  bip44CoinType: 2,
  derivationPurpose: 84,
  uriScheme: 'litecoin',
  dustLimitBaseUnits: 2_940,
};

/** bech32 human-readable parts of the UTXO chains. */
export const BECH32_HRP: Readonly<Record<'bitcoin' | 'litecoin', Readonly<Record<Network, string>>>> = {
  bitcoin: { mainnet: 'bc', testnet: 'tb' },
  litecoin: { mainnet: 'ltc', testnet: 'tltc' },
};
