/**
 * The Tron adapter's TRC-20 reading and the TRC-20 payout check, against the Tron full-node HTTP
 * API STAND-IN (services/invoice/test/support/tron-stand-in.ts: no Tron node installs here) whose
 * TransactionInfos carry Transfer events as java-tron writes them (docs/networks.md#tron-trc-20).
 * The watcher's whole path (invoices Paid, batches, reorgs) is services/invoice/test/watcher-tron-trc20.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { Code } from '@connectrpc/connect';
import type { ChainAdapter, WatchedAddresses } from '../src/chain-adapter';
import { ChainSourceError } from '../src/chain-adapter';
import { TRX, USDC_TRON, USDT_TRON } from '../src/tron/coins';
import { tronFamily } from '../src/tron/family';
import { TronPayoutCheck } from '../src/tron/payout-check';
import { TronAdapter } from '../src/tron/tron-adapter';
import { base58CheckEncode } from '../../invoice/test/support/independent-codecs';
import { TronStandIn } from '../../invoice/test/support/tron-stand-in';

const USDT = USDT_TRON.token!.contract.mainnet;
const USDC = 'TEkxiTehnzSmSe2XqrBj4w32RUN966rdz8';
const someTronAddress = () => base58CheckEncode(Buffer.concat([Buffer.from([0x41]), randomBytes(20)]));

let chain: TronStandIn;
beforeAll(async () => {
  chain = await TronStandIn.start();
});
afterAll(async () => {
  await chain?.close();
});

function watching(...addresses: string[]): WatchedAddresses {
  return { size: addresses.length, all: addresses, lookup: (a) => (addresses.includes(a) ? a : undefined) };
}

/** The adapter `watch tron` builds from this configuration (tron/family.ts). */
function adapterFor(usdcContract: string): ChainAdapter {
  const config = {
    CHAIN_TRON_API_URL: chain.url,
    CHAIN_TRON_USDT_CONTRACT: USDT,
    CHAIN_TRON_USDC_CONTRACT: usdcContract,
    CHAIN_TRON_CONFIRMATIONS: 20,
    CHAIN_TRON_POLL_MS: 100,
    CHAIN_SOURCE_TIMEOUT_MS: 2_000,
  };
  return tronFamily.sources(config).tron!.adapter()!;
}

async function scan(adapter: ChainAdapter, height: number, addresses: WatchedAddresses) {
  const ref = (await adapter.blockAt(height))!;
  return adapter.scanBlock(ref, addresses);
}

describe('the adapter', () => {
  test('USDC on Tron is watched only where CHAIN_TRON_USDC_CONTRACT is configured', async () => {
    const payee = someTronAddress();
    const block = chain.mine([chain.trc20Transfer(USDC, payee, 3_000_000), chain.trc20Transfer(USDT, payee, 4_000_000)]);

    const unconfigured = adapterFor('');
    expect(unconfigured.assets).toEqual(['TRX', 'USDT']);
    expect((await scan(unconfigured, block.number, watching(payee))).map((t) => [t.asset, t.amount.toFixed()])).toEqual([['USDT', '4']]);

    const configured = adapterFor(USDC);
    expect(configured.assets).toEqual(['TRX', 'USDT', 'USDC']);
    expect((await scan(configured, block.number, watching(payee))).map((t) => [t.asset, t.amount.toFixed()])).toEqual([
      ['USDC', '3'],
      ['USDT', '4'],
    ]);
  });

  test('a TRX transfer and TRC-20 events in one block; only watched addresses, only the configured contract, only successful calls', async () => {
    const [payee, other] = [someTronAddress(), someTronAddress()];
    const trx = chain.transfer(payee, 1_500_000);
    const token = chain.trc20Transfer(USDT, payee, 2_000_001);
    const elsewhere = chain.trc20Transfer(USDT, other, 9_000_000);
    const reverted = chain.trc20Transfer(USDT, payee, 7_000_000, false);
    const otherToken = chain.trc20Transfer(someTronAddress(), payee, 6_000_000);
    const batch = chain.batchTransfer(someTronAddress(), USDT, [
      { to: other, amount: 1n },
      { to: payee, amount: 123_456n },
    ]);
    const block = chain.mine([trx, token, elsewhere, reverted, otherToken, batch]);
    const found = await scan(new TronAdapter({ apiUrl: chain.url, timeoutMs: 2_000, tokens: { USDT } }), block.number, watching(payee));
    expect(found.map((t) => ({ tx: t.transactionHash, index: t.outputIndex, asset: t.asset, amount: t.amount.toFixed(), height: t.block?.height }))).toEqual([
      { tx: trx.txID, index: -1, asset: 'TRX', amount: '1.5', height: block.number },
      { tx: token.txID, index: 0, asset: 'USDT', amount: '2.000001', height: block.number },
      // The batch's second Transfer log.
      { tx: batch.txID, index: 1, asset: 'USDT', amount: '0.123456', height: block.number },
    ]);
  });

  test('transaction infos of another block at the height (a reorg between the reads) are an error, never mixed in', async () => {
    const payee = someTronAddress();
    const stale = chain.mine([chain.trc20Transfer(USDT, payee, 1_000_000)]);
    const adapter = new TronAdapter({ apiUrl: chain.url, timeoutMs: 2_000, tokens: { USDT } });
    const ref = (await adapter.blockAt(stale.number))!;
    // The block leaves the chain (still known by id, as java-tron keeps fork blocks); another takes its height.
    chain.reorg(stale.number);
    chain.mine([chain.trc20Transfer(USDT, payee, 5_000_000)]);
    const error = await adapter.scanBlock(ref, watching(payee)).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ChainSourceError);
    expect(error).toMatchObject({ kind: 'missing_block', message: expect.stringContaining(`are not those of block ${ref.hash}`) });
  });

  test('reconciliation: no balances (a full node answers head state only); an asset it does not report is refused', async () => {
    const adapter: ChainAdapter = new TronAdapter({ apiUrl: chain.url, timeoutMs: 2_000, tokens: { USDT } });
    const head = await adapter.head();
    expect(await adapter.balancesAt('USDT', [someTronAddress()], head)).toEqual(new Map());
    await expect(adapter.balancesAt('USDC', [someTronAddress()], head)).rejects.toThrow('USDC is not an asset');
  });
});

describe('the payout check of a TRC-20 payout', () => {
  const checker = () => new TronPayoutCheck({ apiUrl: chain.url, timeoutMs: 2_000, contracts: { USDT } });

  test('the exact USDT transfer to the destination completes it; anything else is refused with the reason', async () => {
    const destination = someTronAddress();
    const input = (transactionHash: string) => ({ transactionHash, coin: USDT_TRON, address: destination, amount: '27.5' });
    const right = chain.trc20Transfer(USDT, destination, 27_500_000);
    expect(await checker().check(input(right.txID))).toMatchObject({ ok: false, code: 'transaction_not_found', connectCode: Code.FailedPrecondition });

    const short = chain.trc20Transfer(USDT, destination, 27_499_999);
    const elsewhere = chain.trc20Transfer(USDT, someTronAddress(), 27_500_000);
    const reverted = chain.trc20Transfer(USDT, destination, 27_500_000, false);
    const otherToken = chain.trc20Transfer(someTronAddress(), destination, 27_500_000);
    const trx = chain.transfer(destination, 27_500_000);
    const batch = chain.batchTransfer(someTronAddress(), USDT, [
      { to: someTronAddress(), amount: 5n },
      { to: destination, amount: 27_500_000n },
    ]);
    chain.mine([right, short, elsewhere, reverted, otherToken, trx, batch]);

    expect(await checker().check(input(right.txID))).toEqual({ ok: true });
    // A batch payout's call: the token's Transfer event to the destination is what counts.
    expect(await checker().check(input(batch.txID))).toEqual({ ok: true });
    expect(await checker().check(input(short.txID))).toMatchObject({ ok: false, code: 'transaction_mismatch', reason: expect.stringContaining(`sends 27.499999 USDT to ${destination}`) });
    expect(await checker().check(input(elsewhere.txID))).toMatchObject({ ok: false, code: 'transaction_mismatch' });
    expect(await checker().check(input(reverted.txID))).toMatchObject({ ok: false, code: 'transaction_failed', reason: expect.stringContaining('REVERT') });
    expect(await checker().check(input(otherToken.txID))).toMatchObject({ ok: false, code: 'transaction_mismatch', reason: expect.stringContaining('no USDT (TRC-20) transfer') });
    expect(await checker().check(input(trx.txID))).toMatchObject({ ok: false, code: 'transaction_mismatch', reason: expect.stringContaining('no USDT (TRC-20) transfer') });
    // The TRX check is unchanged: a TRX payout is not paid by the token transfer.
    expect(await checker().check({ ...input(right.txID), coin: TRX })).toMatchObject({ ok: false, code: 'transaction_mismatch' });
    expect(await checker().check({ ...input(trx.txID), coin: TRX })).toEqual({ ok: true });
  });

  test('a token without a configured contract fails closed', async () => {
    const tx = chain.trc20Transfer(USDC, someTronAddress(), 1_000_000);
    chain.mine([tx]);
    await expect(checker().check({ transactionHash: tx.txID, coin: USDC_TRON, address: someTronAddress(), amount: '1' })).rejects.toThrow('no contract configured');
  });
});
