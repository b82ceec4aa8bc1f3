/**
 * FindHouseAddress (docs/treasury.md#house-addresses): the payout service asks it before paying out,
 * so no payout strands coins on an address coinvoice holds — an invoice's deposit address (any
 * project, environment or network, in any letter case it may be written) or an EVM treasury
 * address of the service's keys.
 */
import { treasuryAddressOf } from '@coinvoice/chains/evm/treasury';
import { base58check } from '@coinvoice/chains/base58check';
import { throwawayXpubs } from '../../../test/support/xpubs';
import { createRequest, liveProject, sandboxProject, startInvoiceHarness, type Harness } from './support/harness';

let h: Harness;
const xpubs = throwawayXpubs();

beforeAll(async () => {
  h = await startInvoiceHarness({ env: { ...xpubs } });
});

afterAll(async () => {
  await h?.dispose();
});

const kindOf = async (address: string) => (await h.client.findHouseAddress({ address })).kind;

test('an invoice deposit address is "deposit" as issued, and an EVM one in lower or upper case; a bech32 one in upper case', async () => {
  const eth = (await h.client.createInvoice(createRequest(liveProject(), { payCurrency: 'ETH' }))).invoice!;
  expect(eth.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
  expect(await kindOf(eth.address)).toBe('deposit');
  expect(await kindOf(eth.address.toLowerCase())).toBe('deposit');
  expect(await kindOf(`0x${eth.address.slice(2).toUpperCase()}`)).toBe('deposit');
  expect(await kindOf(` ${eth.address} `)).toBe('deposit');

  const btc = (await h.client.createInvoice(createRequest(sandboxProject(), { payCurrency: 'BTC' }))).invoice!;
  expect(await kindOf(btc.address)).toBe('deposit');
  expect(await kindOf(btc.address.toUpperCase())).toBe('deposit');

  const trx = (await h.client.createInvoice(createRequest(liveProject(), { payCurrency: 'TRX' }))).invoice!;
  expect(await kindOf(trx.address)).toBe('deposit');
});

test('the same key in the other family\'s spelling: a Tron deposit written as an EVM address, an EVM deposit or treasury written as a Tron address (an outside review paid them out)', async () => {
  const keyHashOfTron = (t: string) => Buffer.from(base58check.decode(t).slice(1)).toString('hex');
  const tronOf = (evm: string) => base58check.encode(Uint8Array.of(0x41, ...Buffer.from(evm.slice(2), 'hex')));
  const trx = (await h.client.createInvoice(createRequest(liveProject(), { payCurrency: 'TRX' }))).invoice!;
  expect(await kindOf(`0x${keyHashOfTron(trx.address)}`)).toBe('deposit');
  expect(await kindOf(`0x${keyHashOfTron(trx.address).toUpperCase()}`)).toBe('deposit');
  const eth = (await h.client.createInvoice(createRequest(liveProject(), { payCurrency: 'ETH' }))).invoice!;
  expect(await kindOf(tronOf(eth.address))).toBe('deposit');
  expect(await kindOf(tronOf(treasuryAddressOf(xpubs.INVOICE_XPUB_ETH)!))).toBe('treasury');
});

test('the same key on the other UTXO chain or network: a BTC deposit written as ltc1/tltc1/tb1, an LTC deposit as bc1 (an outside review found them payable)', async () => {
  const { bech32 } = await import('@scure/base');
  const respelled = (address: string, hrp: string) => bech32.encode(hrp, bech32.decode(address as `${string}1${string}`).words);
  const btc = (await h.client.createInvoice(createRequest(liveProject(), { payCurrency: 'BTC' }))).invoice!;
  expect(btc.address).toMatch(/^bc1q/);
  for (const hrp of ['ltc', 'tltc', 'tb']) expect([hrp, await kindOf(respelled(btc.address, hrp))]).toEqual([hrp, 'deposit']);
  expect(await kindOf(respelled(btc.address, 'ltc').toUpperCase())).toBe('deposit');
  const ltc = (await h.client.createInvoice(createRequest(sandboxProject(), { payCurrency: 'LTC' }))).invoice!;
  expect(ltc.address).toMatch(/^tltc1q/);
  for (const hrp of ['bc', 'tb', 'ltc']) expect([hrp, await kindOf(respelled(ltc.address, hrp))]).toEqual([hrp, 'deposit']);
  // Another program under a UTXO prefix is nobody's.
  expect(await kindOf(respelled('bc1q2hx9vru3a5cfpsaval472y69ljx7wfxf6kq9ay', 'ltc'))).toBe('');
});

test('the EVM treasury of the configured key is "treasury"; an unknown address, an empty or an absurd one is nobody\'s', async () => {
  const treasury = treasuryAddressOf(xpubs.INVOICE_XPUB_ETH)!;
  expect(await kindOf(treasury)).toBe('treasury');
  expect(await kindOf(treasury.toLowerCase())).toBe('treasury');
  expect(await kindOf('0x000000000000000000000000000000000000dEaD')).toBe('');
  expect(await kindOf('bc1q2hx9vru3a5cfpsaval472y69ljx7wfxf6kq9ay')).toBe('');
  expect(await kindOf('')).toBe('');
  expect(await kindOf('x'.repeat(5000))).toBe('');
});
