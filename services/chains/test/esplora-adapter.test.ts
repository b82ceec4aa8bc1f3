/**
 * The Esplora adapter on its own against the Esplora STAND-IN (real bitcoinjs-lib transactions):
 * a block of more than one page (25) of transactions is read completely, outputs to watched
 * addresses only, one transaction paying two of them counted per output; what an address had
 * received as of a block ignores later blocks; a source that is down or answers nonsense is a
 * ChainSourceError, never an empty answer.
 */
import { ChainSourceError, type WatchedAddresses } from '../src/chain-adapter';
import { EsploraAdapter, scriptHashOf } from '../src/utxo/esplora-adapter';
import { EsploraStandIn, Payer } from '../../invoice/test/support/esplora-stand-in';

let chain: EsploraStandIn;
let adapter: EsploraAdapter;

beforeAll(async () => {
  chain = await EsploraStandIn.start();
  adapter = new EsploraAdapter({ chain: 'bitcoin', baseUrl: chain.url, timeoutMs: 2_000 });
});

afterAll(async () => {
  await chain.close();
});

function watching(...addresses: string[]): WatchedAddresses {
  return { size: addresses.length, all: addresses, lookup: (a) => (addresses.includes(a) ? a : undefined) };
}

test('a block of 30 transactions is read over two pages; only watched outputs, each output once', async () => {
  const ours = [new Payer(chain.network).payment.address!, new Payer(chain.network).payment.address!];
  const stranger = new Payer(chain.network).payment.address!;
  const payer = chain.fundedPayer(1_000_000, 30);
  const txs = Array.from({ length: 30 }, (_, i) =>
    chain.pay(payer, i === 27 ? [{ address: ours[0]!, value: 10_000 }, { address: ours[1]!, value: 20_000 }] : [{ address: stranger, value: 5_000 }]),
  );
  const block = chain.mine(txs);
  const ref = (await adapter.blockAt(block.height))!;
  expect(ref).toMatchObject({ height: block.height, hash: block.hash, parentHash: block.parent });
  const transfers = await adapter.scanBlock(ref, watching(...ours));
  expect(transfers.map((t) => [t.transactionHash, t.outputIndex, t.address, t.amount.toString()])).toEqual([
    [txs[27]!.txid, 0, ours[0], '0.0001'],
    [txs[27]!.txid, 1, ours[1], '0.0002'],
  ]);
  // Real transactions: the txid is the double SHA-256 of the signed serialization.
  expect(txs[27]!.tx.getId()).toBe(txs[27]!.txid);
});

test('received as of a block ignores later blocks', async () => {
  const address = new Payer(chain.network).payment.address!;
  const payer = chain.fundedPayer(1_000_000, 2);
  const first = chain.mine([chain.pay(payer, [{ address, value: 30_000 }])]);
  chain.mine([chain.pay(payer, [{ address, value: 70_000 }])]);
  const at = (await adapter.blockAt(first.height))!;
  expect((await adapter.balancesAt('BTC', [address], at)).get(address)?.toString()).toBe('0.0003');
  const head = await adapter.head();
  expect((await adapter.balancesAt('BTC', [address], head)).get(address)?.toString()).toBe('0.001');
  expect(scriptHashOf(address)).toMatch(/^[0-9a-f]{64}$/);
});

test('a source that is down, or a block that is not the one asked for, is an error, never an empty answer', async () => {
  const head = await adapter.head();
  chain.down = true;
  try {
    await expect(adapter.head()).rejects.toMatchObject({ name: 'ChainSourceError', kind: 'unavailable' });
    await expect(adapter.scanBlock(head, watching())).rejects.toBeInstanceOf(ChainSourceError);
  } finally {
    chain.down = false;
  }
  await expect(adapter.scanBlock({ ...head, hash: 'f'.repeat(64) }, watching())).rejects.toMatchObject({ kind: 'missing_block' });
  expect(await adapter.blockAt(head.height + 100)).toBeNull();
});
