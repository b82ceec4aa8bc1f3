import { CRYPTO_CODES } from '../src/coin';
import { DEFAULT_NETWORK, PAY_METHODS, SUPPORTED_CRYPTO, cryptoCurrency, findCryptoCurrency, networksCarrying, payMethod, paymentUri, registryPaymentTarget } from '../src/currencies';
import { FIAT_CODES, fiatCurrency, findFiatCurrency } from '@coinvoice/domain/fiat';
import { Decimal } from '@coinvoice/domain/money';
import { eip55 } from '../../invoice/test/support/independent-codecs';

describe('currency registry', () => {
  it('has the fiat currencies with their ISO 4217 minor units', () => {
    for (const code of FIAT_CODES) expect(findFiatCurrency(code)).toEqual({ ok: true, value: fiatCurrency(code) });
    const minorUnits = Object.fromEntries(FIAT_CODES.map((code) => [code, fiatCurrency(code).minorUnits]));
    expect(minorUnits).toEqual({ USD: 2, EUR: 2, GBP: 2, JPY: 0, CHF: 2, CAD: 2, AUD: 2 });
  });

  it('has the crypto currencies with chain, decimals, address format and BIP44 coin type', () => {
    const summary = SUPPORTED_CRYPTO.map((c) => [c.code, c.chain, c.amountDecimals, c.baseUnitDecimals, c.addressFormat, c.bip44CoinType]);
    expect(summary).toEqual([
      ['BTC', 'bitcoin', 8, 8, 'p2wpkh', 0],
      ['LTC', 'litecoin', 8, 8, 'p2wpkh', 2],
      ['ETH', 'ethereum', 8, 18, 'eip55', 60],
      ['USDT', 'ethereum', 6, 6, 'eip55', 60],
      ['USDC', 'ethereum', 6, 6, 'eip55', 60],
      ['TRX', 'tron', 6, 6, 'tron-base58check', 195],
      ['POL', 'polygon', 8, 18, 'eip55', 60],
      ['BNB', 'bsc', 8, 18, 'eip55', 60],
    ]);
    for (const c of SUPPORTED_CRYPTO) expect(c.amountDecimals).toBeLessThanOrEqual(Math.min(8, c.baseUnitDecimals));
  });

  it('lists EVM token contracts with valid EIP-55 checksums (a test chain may have none)', () => {
    const evmTokens = PAY_METHODS.filter((m) => m.token && m.addressFormat === 'eip55');
    expect(evmTokens.length).toBe(11);
    for (const method of evmTokens) {
      for (const contract of Object.values(method.token!.contract)) if (contract !== null) expect(eip55(contract.slice(2).toLowerCase())).toBe(contract);
    }
  });

  it('refuses unsupported codes naming the supported ones', () => {
    expect(findFiatCurrency('XYZ')).toEqual({ ok: false, reason: 'unsupported currency "XYZ"; supported: USD, EUR, GBP, JPY, CHF, CAD, AUD' });
    expect(findCryptoCurrency('DOGE')).toEqual({ ok: false, reason: 'unsupported currency "DOGE"; supported: BTC, LTC, ETH, USDT, USDC, TRX, POL, BNB' });
    expect(findCryptoCurrency('usdt')).toEqual({ ok: true, value: cryptoCurrency('USDT') }); // any letter case, normalised
    expect(findFiatCurrency('Eur')).toEqual({ ok: true, value: fiatCurrency('EUR') });
    expect(findFiatCurrency('BTC').ok).toBe(false); // a crypto code is not a price currency
    expect(findCryptoCurrency(undefined)).toEqual({ ok: false, reason: 'unsupported currency of type undefined; supported: BTC, LTC, ETH, USDT, USDC, TRX, POL, BNB' });
    const long = findFiatCurrency('X'.repeat(10_000));
    expect(!long.ok && long.reason.length).toBeLessThan(100);
  });

  it('has every (asset, network) pair with its decimals and key currency (docs/networks.md)', () => {
    const pairs = PAY_METHODS.map((c) => [c.code, c.chain, c.amountDecimals, c.baseUnitDecimals, c.addressFormat, c.keyCurrency]);
    expect(pairs).toEqual([
      ['BTC', 'bitcoin', 8, 8, 'p2wpkh', 'BTC'],
      ['LTC', 'litecoin', 8, 8, 'p2wpkh', 'LTC'],
      ['ETH', 'ethereum', 8, 18, 'eip55', 'ETH'],
      ['USDT', 'ethereum', 6, 6, 'eip55', 'USDT'],
      ['USDC', 'ethereum', 6, 6, 'eip55', 'USDC'],
      ['ETH', 'base', 8, 18, 'eip55', 'ETH'],
      ['USDC', 'base', 6, 6, 'eip55', 'USDC'],
      ['ETH', 'arbitrum', 8, 18, 'eip55', 'ETH'],
      ['USDT', 'arbitrum', 6, 6, 'eip55', 'USDT'],
      ['USDC', 'arbitrum', 6, 6, 'eip55', 'USDC'],
      ['ETH', 'optimism', 8, 18, 'eip55', 'ETH'],
      ['USDT', 'optimism', 6, 6, 'eip55', 'USDT'],
      ['USDC', 'optimism', 6, 6, 'eip55', 'USDC'],
      ['POL', 'polygon', 8, 18, 'eip55', 'POL'],
      ['USDT', 'polygon', 6, 6, 'eip55', 'USDT'],
      ['USDC', 'polygon', 6, 6, 'eip55', 'USDC'],
      ['BNB', 'bsc', 8, 18, 'eip55', 'BNB'],
      // 18 decimals on chain, 6 in amounts: an amount means the same on every network.
      ['USDT', 'bsc', 6, 18, 'eip55', 'USDT'],
      ['USDC', 'bsc', 6, 18, 'eip55', 'USDC'],
      ['TRX', 'tron', 6, 6, 'tron-base58check', 'TRX'],
      // A Tron account holds TRC-20 tokens: their addresses come from the TRX key.
      ['USDT', 'tron', 6, 6, 'tron-base58check', 'TRX'],
      ['USDC', 'tron', 6, 6, 'tron-base58check', 'TRX'],
    ]);
    expect(networksCarrying('USDT')).toEqual(['ethereum', 'arbitrum', 'optimism', 'polygon', 'bsc', 'tron']);
    expect(payMethod('USDT', 'base')).toBeUndefined();
    for (const code of CRYPTO_CODES) expect(payMethod(code, DEFAULT_NETWORK[code])).toBe(cryptoCurrency(code));
  });

  it('does not treat inherited property names as codes', () => {
    expect(findFiatCurrency('constructor').ok).toBe(false);
    expect(findCryptoCurrency('__proto__').ok).toBe(false);
  });
});

describe('payment URIs', () => {
  const amount = new Decimal('0.00095239');

  it('BIP21 for BTC and LTC', () => {
    expect(paymentUri(cryptoCurrency('BTC'), 'bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu', amount, registryPaymentTarget(cryptoCurrency('BTC'), 'mainnet'))).toBe(
      'bitcoin:bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu?amount=0.00095239',
    );
    expect(paymentUri(cryptoCurrency('LTC'), 'tltc1qexample', new Decimal('1.5'), registryPaymentTarget(cryptoCurrency('LTC'), 'testnet'))).toBe('litecoin:tltc1qexample?amount=1.5');
  });

  it('EIP-681 for ETH, in wei, with the chain id on testnet only', () => {
    const address = '0x9858EfFD232B4033E47d90003D41EC34EcaEda94';
    expect(paymentUri(cryptoCurrency('ETH'), address, new Decimal('0.01'), registryPaymentTarget(cryptoCurrency('ETH'), 'mainnet'))).toBe(`ethereum:${address}?value=10000000000000000`);
    expect(paymentUri(cryptoCurrency('ETH'), address, new Decimal('0.01'), registryPaymentTarget(cryptoCurrency('ETH'), 'testnet'))).toBe(`ethereum:${address}@11155111?value=10000000000000000`);
  });

  it('EIP-681 token transfer for ERC-20, in token base units', () => {
    const address = '0x9858EfFD232B4033E47d90003D41EC34EcaEda94';
    expect(paymentUri(cryptoCurrency('USDT'), address, new Decimal('25.5'), registryPaymentTarget(cryptoCurrency('USDT'), 'mainnet'))).toBe(
      `ethereum:0xdAC17F958D2ee523a2206206994597C13D831ec7/transfer?address=${address}&uint256=25500000`,
    );
    expect(paymentUri(cryptoCurrency('USDC'), address, new Decimal('0.000001'), registryPaymentTarget(cryptoCurrency('USDC'), 'testnet'))).toBe(
      `ethereum:0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238@11155111/transfer?address=${address}&uint256=1`,
    );
  });

  it('tron: for TRX', () => {
    expect(paymentUri(cryptoCurrency('TRX'), 'TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH', new Decimal('12.345678'), registryPaymentTarget(cryptoCurrency('TRX'), 'mainnet'))).toBe(
      'tron:TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH?amount=12.345678',
    );
  });

  it('EIP-681 names the chain id of every network but Ethereum mainnet, in the entry\'s own base units', () => {
    const address = '0x9858EfFD232B4033E47d90003D41EC34EcaEda94';
    // USDT on bsc: 100.000000 USDT is 100·10^18 token base units (docs/networks.md).
    expect(paymentUri(payMethod('USDT', 'bsc')!, address, new Decimal('100'), registryPaymentTarget(payMethod('USDT', 'bsc')!, 'mainnet'))).toBe(
      `ethereum:0x55d398326f99059fF775485246999027B3197955@56/transfer?address=${address}&uint256=100000000000000000000`,
    );
    expect(paymentUri(payMethod('USDC', 'base')!, address, new Decimal('2.5'), registryPaymentTarget(payMethod('USDC', 'base')!, 'mainnet'))).toBe(
      `ethereum:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913@8453/transfer?address=${address}&uint256=2500000`,
    );
    expect(paymentUri(payMethod('POL', 'polygon')!, address, new Decimal('1'), registryPaymentTarget(payMethod('POL', 'polygon')!, 'mainnet'))).toBe(`ethereum:${address}@137?value=1000000000000000000`);
  });

  it('tron: with &token= for TRC-20 tokens', () => {
    expect(paymentUri(payMethod('USDT', 'tron')!, 'TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH', new Decimal('12.5'), registryPaymentTarget(payMethod('USDT', 'tron')!, 'mainnet'))).toBe(
      'tron:TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH?amount=12.5&token=TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
    );
  });

  it('names the contract and chain id it is given, not the registry\'s (a live invoice\'s are the configuration the watcher reads)', () => {
    const address = '0x9858EfFD232B4033E47d90003D41EC34EcaEda94';
    const configured = '0x1111111111111111111111111111111111111111';
    expect(paymentUri(payMethod('USDC', 'base')!, address, new Decimal('2.5'), { contract: configured, chainId: 31337 })).toBe(
      `ethereum:${configured}@31337/transfer?address=${address}&uint256=2500000`,
    );
    expect(paymentUri(cryptoCurrency('ETH'), address, new Decimal('0.01'), { contract: null, chainId: 31337 })).toBe(`ethereum:${address}@31337?value=10000000000000000`);
    expect(paymentUri(payMethod('USDT', 'tron')!, 'TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH', new Decimal('12.5'), { contract: 'TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf', chainId: undefined })).toBe(
      'tron:TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH?amount=12.5&token=TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf',
    );
    expect(() => paymentUri(cryptoCurrency('ETH'), address, new Decimal('0.01'), { contract: null, chainId: undefined })).toThrow('no chain id');
  });

  it('a token without a contract on its test chain gets the bare address, never an amount a wallet would read as the native coin', () => {
    // The reviewers' case: a sandbox USDT invoice on tron offered `tron:T…?amount=14.067601`, i.e. 14 TRX.
    const tronAddress = 'TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH';
    expect(registryPaymentTarget(payMethod('USDT', 'tron')!, 'testnet').contract).toBeNull();
    expect(paymentUri(payMethod('USDT', 'tron')!, tronAddress, new Decimal('14.067601'), registryPaymentTarget(payMethod('USDT', 'tron')!, 'testnet'))).toBe(`tron:${tronAddress}`);
    const evmAddress = '0x9858EfFD232B4033E47d90003D41EC34EcaEda94';
    expect(registryPaymentTarget(payMethod('USDT', 'bsc')!, 'testnet').contract).toBeNull();
    expect(paymentUri(payMethod('USDT', 'bsc')!, evmAddress, new Decimal('14.067601'), registryPaymentTarget(payMethod('USDT', 'bsc')!, 'testnet'))).toBe(`ethereum:${evmAddress}@97`);
  });

  it('refuses an amount finer than the coin can carry', () => {
    expect(() => paymentUri(cryptoCurrency('USDT'), '0x9858EfFD232B4033E47d90003D41EC34EcaEda94', new Decimal('0.0000001'), registryPaymentTarget(cryptoCurrency('USDT'), 'mainnet'))).toThrow(RangeError);
  });
});
