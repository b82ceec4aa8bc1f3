/**
 * Adversarial review of issue 24 (TRC-20 on Tron): hostile but VALID blocks against the Tron
 * adapter, served by the Tron stand-in (services/invoice/test/support/tron-stand-in.ts).
 *
 * java-tron writes a TransactionInfo's `log[]` entries with its protobuf JsonFormat, which prints
 * only the fields that are set: an empty repeated `topics` (an anonymous event: LOG0) and an empty
 * `data` (an event with no unindexed arguments, e.g. Tether's `Pause()`) are left out — the same
 * rule by which the adapter itself expects `log` to be absent for a transaction without events
 * (`info.log ?? []`). Anyone can deploy a contract that emits LOG0 for a few TRX.
 *
 * A scan that throws `malformed` is retried on the same block at every poll (watcher.ts `run`):
 * such a block stops `watch tron` for good, and every TRX and USDT payment after it is never seen.
 */
import { randomBytes } from 'node:crypto';
import type { WatchedAddresses } from '../src/chain-adapter';
import { USDT_TRON } from '../src/tron/coins';
import { TronAdapter } from '../src/tron/tron-adapter';
import { base58CheckEncode } from '../../invoice/test/support/independent-codecs';
import { TronStandIn, tronHex } from '../../invoice/test/support/tron-stand-in';

const USDT = USDT_TRON.token!.contract.mainnet;
const someTronAddress = () => base58CheckEncode(Buffer.concat([Buffer.from([0x41]), randomBytes(20)]));
/** keccak256("Pause()"), bare hex. */
const PAUSE_TOPIC = '6985a02210a168e66602d3235cb6db0e70f92b3ba4d376a33c0f3d9434bff625';

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

type StandInTx = ReturnType<TronStandIn['transfer']>;

/** A successful contract call of `contract` whose only event is `log`, as java-tron prints it (empty fields left out). */
function callEmitting(contract: string, log: Record<string, unknown>): StandInTx {
  const tx = chain.trc20Transfer(contract, someTronAddress(), 0);
  // The stand-in writes `logs` as given; the shape here is java-tron's for the event.
  return { ...tx, logs: [log as unknown as NonNullable<StandInTx['logs']>[number]] };
}

describe('review-networks: hostile TRC-20 logs', () => {
  it('an anonymous event (LOG0, no topics) of ANY contract in a block makes the adapter refuse the block, so a USDT payment in it is never reported and the watcher stalls there', async () => {
    const payee = someTronAddress();
    const attacker = someTronAddress();
    const payment = chain.trc20Transfer(USDT, payee, 25_000_000);
    // `log0(0, 0)`: no topics, no data — java-tron prints only the address.
    const anonymous = callEmitting(attacker, { address: tronHex(attacker).slice(2) });
    const block = chain.mine([payment, anonymous]);

    const adapter = new TronAdapter({ apiUrl: chain.url, timeoutMs: 2_000, tokens: { USDT } });
    const ref = (await adapter.blockAt(block.number))!;
    const found = await adapter.scanBlock(ref, watching(payee));
    expect(found.map((t) => [t.transactionHash, t.asset, t.amount.toFixed()])).toEqual([[payment.txID, 'USDT', '25']]);
  });

  it("Tether's own Pause() event (one topic, no data, so java-tron prints no `data`) makes the adapter refuse the block, so the USDT payments in it are never reported and the watcher stalls there", async () => {
    const payee = someTronAddress();
    const payment = chain.trc20Transfer(USDT, payee, 7_000_000);
    const pause = callEmitting(USDT, { address: tronHex(USDT).slice(2), topics: [PAUSE_TOPIC] });
    const block = chain.mine([payment, pause]);

    const adapter = new TronAdapter({ apiUrl: chain.url, timeoutMs: 2_000, tokens: { USDT } });
    const ref = (await adapter.blockAt(block.number))!;
    const found = await adapter.scanBlock(ref, watching(payee));
    expect(found.map((t) => [t.transactionHash, t.asset, t.amount.toFixed()])).toEqual([[payment.txID, 'USDT', '7']]);
  });
});
