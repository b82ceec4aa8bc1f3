/**
 * The invoice service's settings as the process loads them (a bad value stops the start with the
 * variable named), and key identity: one key material is one counter, whatever its serialization.
 */
import { ConfigError, loadServiceConfig } from '@coinvoice/runtime';
import { generateDevelopmentKeyPair } from '@coinvoice/chains/addresses';
import { keyMaterialHash } from '@coinvoice/chains/account-key';
import { invoiceService } from '../src/server';
import { base58CheckDecode, base58CheckEncode } from './support/independent-codecs';

const BIP84_ZPUB = 'zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs';
const TESTNET = generateDevelopmentKeyPair('BTC', 'testnet', new Uint8Array(32).fill(1));

function load(env: Record<string, string>) {
  return loadServiceConfig(invoiceService, { APP_ENV: 'development', ...env });
}

function configError(env: Record<string, string>): ConfigError {
  try {
    load(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

test('defaults: sweep every 5 s in batches of 100, the shipped rate table, no configured keys', () => {
  const config = load({});
  expect(config.INVOICE_SWEEP_INTERVAL_MS).toBe(5000);
  expect(config.INVOICE_SWEEP_BATCH_SIZE).toBe(100);
  expect(config.INVOICE_RATE_TABLE.rateNow('BTC', 'USD').toString()).toBe('105000');
  expect(config.INVOICE_XPUB_BTC).toBe('');
  expect(config.INVOICE_XPUB_TRX_TESTNET).toBe('');
});

test('configured keys are accepted for their network only', () => {
  expect(load({ INVOICE_XPUB_BTC: BIP84_ZPUB, INVOICE_XPUB_BTC_TESTNET: TESTNET.xpub })).toMatchObject({
    INVOICE_XPUB_BTC: BIP84_ZPUB,
    INVOICE_XPUB_BTC_TESTNET: TESTNET.xpub,
  });
  expect(configError({ INVOICE_XPUB_BTC: TESTNET.xpub }).variable).toBe('INVOICE_XPUB_BTC');
  expect(configError({ INVOICE_XPUB_ETH_TESTNET: BIP84_ZPUB }).variable).toBe('INVOICE_XPUB_ETH_TESTNET');
});

test('a private key or garbage stops the start naming the variable', () => {
  const err = configError({ INVOICE_XPUB_LTC_TESTNET: TESTNET.xprv });
  expect(err.variable).toBe('INVOICE_XPUB_LTC_TESTNET');
  expect(err.message).toContain('never a private key');
  expect(configError({ INVOICE_XPUB_TRX: 'xpub-not-really' }).variable).toBe('INVOICE_XPUB_TRX');
});

test('INVOICE_RATE_TABLE replaces the shipped table; an invalid one stops the start', () => {
  const table = {
    fiatUsd: { USD: '1', EUR: '1.1', GBP: '1.3', JPY: '0.007', CHF: '1.2', CAD: '0.7', AUD: '0.6' },
    cryptoUsd: { BTC: '50000', LTC: '80', ETH: '2000', USDT: '1', USDC: '1', TRX: '0.1', POL: '0.2', BNB: '600' },
  };
  expect(load({ INVOICE_RATE_TABLE: JSON.stringify(table) }).INVOICE_RATE_TABLE.rateNow('BTC', 'USD').toString()).toBe('50000');
  expect(configError({ INVOICE_RATE_TABLE: '{"fiatUsd":{}}' }).variable).toBe('INVOICE_RATE_TABLE');
  expect(configError({ INVOICE_RATE_TABLE: 'not json' }).variable).toBe('INVOICE_RATE_TABLE');
});

test('a watcher reads its whole watched set every WATCHER_FULL_RELOAD: a minute unless set', () => {
  expect(load({}).WATCHER_FULL_RELOAD).toBe(60_000);
  expect(load({ WATCHER_FULL_RELOAD: '5m' }).WATCHER_FULL_RELOAD).toBe(300_000);
  expect(load({ WATCHER_FULL_RELOAD: '2000' }).WATCHER_FULL_RELOAD).toBe(2_000);
  expect(configError({ WATCHER_FULL_RELOAD: 'hourly' }).variable).toBe('WATCHER_FULL_RELOAD');
});

test('sweeper settings are bounded', () => {
  expect(configError({ INVOICE_SWEEP_INTERVAL_MS: '0' }).variable).toBe('INVOICE_SWEEP_INTERVAL_MS');
  expect(configError({ INVOICE_SWEEP_BATCH_SIZE: 'many' }).variable).toBe('INVOICE_SWEEP_BATCH_SIZE');
});

test('a key is identified by its material: the xpub and zpub forms of one key share one counter', () => {
  const payload = base58CheckDecode(BIP84_ZPUB)!;
  const asXpub = base58CheckEncode(Buffer.concat([Buffer.from('0488b21e', 'hex'), payload.subarray(4)]));
  expect(asXpub.startsWith('xpub')).toBe(true);
  expect(keyMaterialHash(asXpub)).toBe(keyMaterialHash(BIP84_ZPUB));
  expect(keyMaterialHash(TESTNET.xpub)).not.toBe(keyMaterialHash(BIP84_ZPUB));
});

test('live payment settings: Ethereum source, confirmations, token contracts, poll, monitoring window', () => {
  const defaults = load({});
  expect(defaults).toMatchObject({
    CHAIN_ETHEREUM_RPC_URL: '',
    CHAIN_ETHEREUM_CONFIRMATIONS: 12,
    CHAIN_ETHEREUM_USDT_CONTRACT: '0xdAC17F958D2ee523a2206206994597C13D831ec7',
    CHAIN_ETHEREUM_USDC_CONTRACT: '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48',
    CHAIN_ETHEREUM_POLL_MS: 2000,
    INVOICE_MONITOR_AFTER_EXPIRY: 24 * 3_600_000,
  });
  expect(load({ CHAIN_ETHEREUM_RPC_URL: 'https://node.example/v3/key', INVOICE_MONITOR_AFTER_EXPIRY: '90m' })).toMatchObject({
    CHAIN_ETHEREUM_RPC_URL: 'https://node.example/v3/key',
    INVOICE_MONITOR_AFTER_EXPIRY: 90 * 60_000,
  });
  expect(configError({ CHAIN_ETHEREUM_RPC_URL: 'ftp://node.example' }).message).toMatch(/^config: CHAIN_ETHEREUM_RPC_URL=/);
  expect(configError({ CHAIN_ETHEREUM_USDT_CONTRACT: '0x1234' }).message).toMatch(/CHAIN_ETHEREUM_USDT_CONTRACT/);
  expect(configError({ CHAIN_ETHEREUM_CONFIRMATIONS: '0' }).message).toMatch(/CHAIN_ETHEREUM_CONFIRMATIONS/);
  expect(configError({ INVOICE_MONITOR_AFTER_EXPIRY: 'a day' }).message).toMatch(/INVOICE_MONITOR_AFTER_EXPIRY/);
});
