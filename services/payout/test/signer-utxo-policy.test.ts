/**
 * Issue 25, the signer's UTXO side (docs/treasury.md#utxo-signer-policy): the `sign` role in this
 * process as its restricted database role (role.sql), signing PSBTs built with bitcoinjs-lib over
 * coins of the test seed funded on the Esplora stand-in. What it signs the stand-in accepts (it
 * verifies every input's signature); every rule has a request it refuses with PermissionDenied
 * naming the rule, audited; a payout once signed is signed again only over the same inputs with a
 * higher fee; the daily limits count a payout once.
 */
import type { Client } from '@connectrpc/connect';
import { Code, createRpcClient } from '@coinvoice/runtime';
import { SignerService, type SignUtxoTransactionRequest } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import * as bitcoin from 'bitcoinjs-lib';
import { parseExtendedPublicKey } from '@coinvoice/chains/addresses';
import { EsploraStandIn, LITECOIN } from '../../invoice/test/support/esplora-stand-in';
import { rejection } from '../../../test/support/async';
import { insertPayout, prepareSignerDatabase, startTestSigner, TEST_BTC_XPUB, TEST_LTC_XPUB, type SignerDatabase, type TestSigner } from './support/signer';
import { fundKey, strangerAddress, testAddress, unsignedPsbt, utxoRequest, type Coin } from './support/utxo-signer';

let db: SignerDatabase;
let signer: TestSigner;
let client: Client<typeof SignerService>;
let btc: EsploraStandIn;
let ltc: EsploraStandIn;

beforeAll(async () => {
  db = await prepareSignerDatabase();
  signer = await startTestSigner({
    databaseUrl: db.signerUrl,
    ownerDatabaseUrl: db.database.url,
    env: {
      INVOICE_XPUB_LTC: TEST_LTC_XPUB,
      SIGNER_MAX_PAYOUT_BTC: '0.01',
      SIGNER_DAILY_LIMIT_BTC: '1',
      SIGNER_DAILY_FEE_LIMIT_BTC: '10000000',
      PAYOUT_MAX_FEE_RATE_BTC: '50',
      SIGNER_MAX_PAYOUT_LTC: '0.002',
      SIGNER_DAILY_LIMIT_LTC: '0.003',
      SIGNER_DAILY_FEE_LIMIT_LTC: '30000',
      PAYOUT_MAX_FEE_RATE_LTC: '1000',
    },
  });
  client = createRpcClient(SignerService, signer.url, { timeoutMs: 15_000 });
  btc = await EsploraStandIn.start(bitcoin.networks.bitcoin);
  ltc = await EsploraStandIn.start(LITECOIN);
}, 60_000);

afterAll(async () => {
  await signer?.stop();
  await db?.dispose();
  await btc?.close();
  await ltc?.close();
});

let nextIndex = 0;
/** A fresh confirmed deposit coin of the test seed (receive branch). */
const deposit = (value: number, standIn = btc, network: 'bitcoin' | 'litecoin' = 'bitcoin'): Coin => fundKey(standIn, network, 0, nextIndex++, value);

async function btcPayout(amount = '0.001', fields: Parameters<typeof insertPayout>[1] = {}) {
  return insertPayout(db.owner, { asset: 'BTC', network: 'bitcoin', amount, address: strangerAddress(btc), ...fields });
}

/** One payout of 100,000 sat with change to account/1/3, paying `fee` sat: the ordinary request. */
async function ordinary(fee = 2_000, coin = deposit(200_000)) {
  const payout = await btcPayout();
  const change = { address: testAddress(btc, 'bitcoin', 1, 3), value: coin.value - 100_000 - fee };
  const psbt = unsignedPsbt(btc, 'bitcoin', { coins: [coin], outputs: [{ address: payout.address, value: 100_000 }, change] });
  return { payout, coin, request: utxoRequest({ psbt, coins: [coin], payouts: [{ payoutId: payout.id, outputIndex: 0 }], change: { outputIndex: 1, addressIndex: 3 } }) };
}

async function refusedWith(request: SignUtxoTransactionRequest, rule: string, code = Code.PermissionDenied) {
  const facts = await rejection(client.signUtxoTransaction(request));
  expect({ code: facts.connectCode, rule: facts.code }).toEqual({ code, rule });
  const [row] = await db.owner<{ outcome: string; rule: string; network: string }[]>`
    select outcome, rule, network from signer.audit_log order by id desc limit 1`;
  expect(row).toEqual({ outcome: 'refused', rule, network: request.network.slice(0, 32) });
}

describe('GetTreasury', () => {
  it('answers account/1/0 (bech32) and the BIP84 account xpub the processor parses', async () => {
    const treasury = await client.getTreasury({ network: 'bitcoin' });
    expect(treasury.address).toBe(testAddress(btc, 'bitcoin', 1, 0));
    expect(treasury.address.startsWith('bc1q')).toBe(true);
    expect(treasury.accountXpub).toBe(TEST_BTC_XPUB);
    expect(parseExtendedPublicKey(treasury.accountXpub).ok).toBe(true);
    const litecoin = await client.getTreasury({ network: 'litecoin' });
    expect(litecoin.address).toBe(testAddress(ltc, 'litecoin', 1, 0));
    expect(litecoin.address.startsWith('ltc1q')).toBe(true);
    expect(litecoin.accountXpub).toBe(TEST_LTC_XPUB);
  });
});

describe('signs', () => {
  it('a batch of payouts with change: exact outputs, accepted by the stand-in, audited with txid, fee, inputs and payouts', async () => {
    const coins = [deposit(150_000), deposit(120_000), deposit(50_000)];
    const payouts = [await btcPayout('0.001'), await btcPayout('0.0012'), await btcPayout('0.0005')];
    const fee = 3_000;
    const outputs = [
      { address: payouts[0]!.address, value: 100_000 },
      { address: payouts[1]!.address, value: 120_000 },
      { address: payouts[2]!.address, value: 50_000 },
      { address: testAddress(btc, 'bitcoin', 1, 1), value: 320_000 - 270_000 - fee },
    ];
    const psbt = unsignedPsbt(btc, 'bitcoin', { coins, outputs });
    const request = utxoRequest({
      psbt,
      coins,
      payouts: payouts.map((p, i) => ({ payoutId: p.id, outputIndex: i })),
      change: { outputIndex: 3, addressIndex: 1 },
    });
    const signed = await client.signUtxoTransaction(request);
    expect(signed.fee).toBe(BigInt(fee));
    const tx = bitcoin.Transaction.fromHex(signed.rawTransaction);
    expect(tx.getId()).toBe(signed.txid);
    expect(tx.virtualSize()).toBe(signed.vsize);
    expect(tx.outs.map((o) => Number(o.value))).toEqual(outputs.map((o) => o.value));
    expect(btc.submit(signed.rawTransaction)).toMatchObject({ accepted: true, txid: signed.txid });
    // Deterministic signatures: asked again (a processor killed before storing), the same bytes.
    expect((await client.signUtxoTransaction(request)).rawTransaction).toBe(signed.rawTransaction);
    const [audit] = await db.owner<{ outcome: string; txid: string; transaction_hash: string; fee: string; inputs: string[]; payout_ids: string[]; amount: string }[]>`
      select outcome, txid, transaction_hash, fee::text, inputs, payout_ids, amount::text from signer.audit_log order by id desc limit 1`;
    expect({ ...audit, payout_ids: [...audit!.payout_ids].sort() }).toEqual({
      outcome: 'signed',
      txid: signed.txid,
      transaction_hash: signed.txid,
      fee: String(fee),
      inputs: coins.map((c) => `${c.txid}:${c.vout}`).sort(),
      payout_ids: payouts.map((p) => p.id).sort(),
      amount: '270000',
    });
    // Counted once, though signed twice.
    const [daily] = await db.owner<{ amount: string }[]>`select amount::text from signer.daily_totals where asset = 'BTC'`;
    expect(BigInt(daily!.amount)).toBeGreaterThanOrEqual(270_000n);
  });

  it('a payout without change', async () => {
    const coin = deposit(101_000);
    const payout = await btcPayout();
    const psbt = unsignedPsbt(btc, 'bitcoin', { coins: [coin], outputs: [{ address: payout.address, value: 100_000 }] });
    const signed = await client.signUtxoTransaction(utxoRequest({ psbt, coins: [coin], payouts: [{ payoutId: payout.id, outputIndex: 0 }] }));
    expect(signed.fee).toBe(1_000n);
    expect(btc.submit(signed.rawTransaction).accepted).toBe(true);
  });
});

describe('refuses', () => {
  it('another network', async () => {
    const { request } = await ordinary();
    await refusedWith({ ...request, network: 'dogecoin' }, 'network_not_supported');
  });

  it('what is not a PSBT, and input keys that do not match the inputs one for one', async () => {
    const { request } = await ordinary();
    await refusedWith({ ...request, psbt: 'cHNidP8BAAAA' }, 'invalid_request', Code.InvalidArgument);
    await refusedWith({ ...request, inputKeys: [...request.inputKeys, ...request.inputKeys] }, 'invalid_request', Code.InvalidArgument);
  });

  it('an input whose key is not the one named (another index), or of a branch other than 0 and 1', async () => {
    const { request } = await ordinary();
    await refusedWith({ ...request, inputKeys: [{ ...request.inputKeys[0]!, index: request.inputKeys[0]!.index + 1 }] } as SignUtxoTransactionRequest, 'input_not_ours');
    await refusedWith({ ...request, inputKeys: [{ ...request.inputKeys[0]!, branch: 2 }] } as SignUtxoTransactionRequest, 'input_not_ours');
  });

  it('an input without its witness_utxo', async () => {
    const coin = deposit(200_000);
    const payout = await btcPayout();
    const psbt = unsignedPsbt(btc, 'bitcoin', { coins: [coin], outputs: [{ address: payout.address, value: 100_000 }], withoutWitnessUtxo: 0 });
    await refusedWith(utxoRequest({ psbt, coins: [coin], payouts: [{ payoutId: payout.id, outputIndex: 0 }] }), 'input_not_ours');
  });

  it('an input that does not signal replaceability', async () => {
    const coin = deposit(200_000);
    const payout = await btcPayout();
    const psbt = unsignedPsbt(btc, 'bitcoin', { coins: [coin], outputs: [{ address: payout.address, value: 100_000 }], sequence: 0xfffffffe });
    await refusedWith(utxoRequest({ psbt, coins: [coin], payouts: [{ payoutId: payout.id, outputIndex: 0 }] }), 'not_replaceable');
  });

  it('the same outpoint spent twice', async () => {
    const coin = deposit(200_000);
    const payout = await btcPayout();
    // bitcoinjs refuses to build it: the PSBT's inputs are duplicated by hand.
    const { Transaction } = await import('@scure/btc-signer');
    const tx = new Transaction({ version: 2, allowUnknownInputs: true });
    const script = bitcoin.address.toOutputScript(testAddress(btc, 'bitcoin', 0, coin.index), btc.network);
    for (let i = 0; i < 2; i++) tx.addInput({ txid: coin.txid, index: coin.vout, sequence: 0xfffffffd, witnessUtxo: { script, amount: BigInt(coin.value) } });
    tx.addOutput({ script: bitcoin.address.toOutputScript(payout.address, btc.network), amount: 100_000n });
    const psbt = Buffer.from(tx.toPSBT(0)).toString('base64');
    await refusedWith(utxoRequest({ psbt, coins: [coin, coin], payouts: [{ payoutId: payout.id, outputIndex: 0 }] }), 'duplicate_input');
  });

  it('a change output that is not account/1/change_address_index', async () => {
    const { request } = await ordinary();
    await refusedWith({ ...request, changeAddressIndex: 4 }, 'change_mismatch');
  });

  it('an output that pays neither a listed payout nor the change', async () => {
    const { request } = await ordinary();
    await refusedWith({ ...request, changeOutputIndex: undefined }, 'output_not_allowed');
  });

  it('a payout output to another address or of another amount', async () => {
    const coin = deposit(200_000);
    const payout = await btcPayout();
    const elsewhere = unsignedPsbt(btc, 'bitcoin', { coins: [coin], outputs: [{ address: strangerAddress(btc), value: 100_000 }] });
    await refusedWith(utxoRequest({ psbt: elsewhere, coins: [coin], payouts: [{ payoutId: payout.id, outputIndex: 0 }] }), 'destination_mismatch');
    const more = unsignedPsbt(btc, 'bitcoin', { coins: [coin], outputs: [{ address: payout.address, value: 100_001 }] });
    await refusedWith(utxoRequest({ psbt: more, coins: [coin], payouts: [{ payoutId: payout.id, outputIndex: 0 }] }), 'amount_mismatch');
  });

  it('a payout listed twice', async () => {
    const { request } = await ordinary();
    await refusedWith({ ...request, payouts: [request.payouts[0]!, { ...request.payouts[0]!, outputIndex: 1 }], changeOutputIndex: undefined } as SignUtxoTransactionRequest, 'invalid_request', Code.InvalidArgument);
  });

  it('a payout not verified, not approved (above PAYOUT_AUTO_MAX_BTC, 0 here), not live, of another coin, or of another network', async () => {
    for (const [fields, rule] of [
      [{ status: 'AwaitingVerification', verified: false }, 'payout_not_signable'],
      [{ approved: false }, 'payout_not_signable'],
      [{ environment: 'sandbox' }, 'payout_not_signable'],
      [{ asset: 'LTC' }, 'asset_not_supported'],
      [{ network: 'litecoin' }, 'network_not_supported'],
    ] as const) {
      const coin = deposit(200_000);
      const payout = await btcPayout('0.001', fields);
      const psbt = unsignedPsbt(btc, 'bitcoin', { coins: [coin], outputs: [{ address: payout.address, value: 100_000 }] });
      await refusedWith(utxoRequest({ psbt, coins: [coin], payouts: [{ payoutId: payout.id, outputIndex: 0 }] }), rule);
    }
  });

  it('no fee, and a fee rate above PAYOUT_MAX_FEE_RATE_BTC on the signed transaction', async () => {
    const coin = deposit(100_000);
    const payout = await btcPayout();
    const psbt = unsignedPsbt(btc, 'bitcoin', { coins: [coin], outputs: [{ address: payout.address, value: 100_000 }] });
    await refusedWith(utxoRequest({ psbt, coins: [coin], payouts: [{ payoutId: payout.id, outputIndex: 0 }] }), 'fee_not_positive');
    // ~110 vB at 50 sat/vB is ~5,500 sat: 8,000 is above the cap.
    const { request } = await ordinary(8_000);
    await refusedWith(request, 'fee_rate_above_cap');
  });

  it('a payout above SIGNER_MAX_PAYOUT_BTC', async () => {
    const coin = deposit(2_000_000);
    const payout = await btcPayout('0.0101');
    const psbt = unsignedPsbt(btc, 'bitcoin', { coins: [coin], outputs: [{ address: payout.address, value: 1_010_000 }, { address: testAddress(btc, 'bitcoin', 1, 0), value: 988_000 }] });
    await refusedWith(utxoRequest({ psbt, coins: [coin], payouts: [{ payoutId: payout.id, outputIndex: 0 }], change: { outputIndex: 1, addressIndex: 0 } }), 'amount_above_limit');
  });
});

describe('a payout already signed', () => {
  it('is signed again only over exactly the same inputs with a higher fee (a BIP125 replacement the stand-in accepts)', async () => {
    const { payout, coin, request } = await ordinary(1_500);
    const first = await client.signUtxoTransaction(request);
    expect(btc.submit(first.rawTransaction).accepted).toBe(true);
    const [before] = await db.owner<{ amount: string }[]>`select amount::text from signer.daily_totals where asset = 'BTC'`;

    const rebuild = (coins: Coin[], fee: number, sequence = 0xfffffffd) =>
      utxoRequest({
        psbt: unsignedPsbt(btc, 'bitcoin', { coins, sequence, outputs: [{ address: payout.address, value: 100_000 }, { address: testAddress(btc, 'bitcoin', 1, 3), value: coins.reduce((sum, c) => sum + c.value, 0) - 100_000 - fee }] }),
        coins,
        payouts: [{ payoutId: payout.id, outputIndex: 0 }],
        change: { outputIndex: 1, addressIndex: 3 },
      });

    // Other inputs: a second transaction paying the payout, which could be mined beside the first.
    await refusedWith(rebuild([deposit(200_000)], 3_000), 'inputs_mismatch');
    await refusedWith(rebuild([coin, deposit(50_000)], 3_000), 'inputs_mismatch');
    // The same inputs without a higher fee.
    await refusedWith(rebuild([coin], 1_500 - 1), 'fee_not_higher');
    // Another transaction (another sequence) at the same fee; the very same one is answered again (above).
    await refusedWith(rebuild([coin], 1_500, 0xfffffffc), 'fee_not_higher');

    const replacement = await client.signUtxoTransaction(rebuild([coin], 3_000));
    expect(replacement.fee).toBe(3_000n);
    expect(btc.submit(replacement.rawTransaction)).toMatchObject({ accepted: true });
    expect(btc.mempool.has(first.txid)).toBe(false);
    // The payout counted once against the daily limit.
    const [after] = await db.owner<{ amount: string }[]>`select amount::text from signer.daily_totals where asset = 'BTC'`;
    expect(after).toEqual(before);
    const [bound] = await db.owner<{ signatures: number; fee: string }[]>`select signatures, fee::text from signer.utxo_payout_signatures where payout_id = ${payout.id}`;
    expect(bound).toEqual({ signatures: 2, fee: '3000' });
  });
});

describe('input amounts (a segwit v0 signature commits to its own input\'s amount only)', () => {
  it('two requests for one transaction saying other input amounts: the second is refused, so no valid transaction burns a fee neither showed', async () => {
    const a = deposit(1_000_000);
    const b = deposit(1_000_000);
    const payout = await btcPayout();
    const outputs = [{ address: payout.address, value: 100_000 }, { address: testAddress(btc, 'bitcoin', 1, 5), value: 898_000 }];
    // Each request honest about one input and saying 0 for the other: a "fee" of 2,000 sat each,
    // where the transaction made of both answers' signatures pays 1,002,000 sat.
    const saying = (amounts: [number, number]) =>
      utxoRequest({
        psbt: unsignedPsbt(btc, 'bitcoin', { coins: [{ ...a, value: amounts[0] }, { ...b, value: amounts[1] }], outputs }),
        coins: [a, b],
        payouts: [{ payoutId: payout.id, outputIndex: 0 }],
        change: { outputIndex: 1, addressIndex: 5 },
      });
    const first = await client.signUtxoTransaction(saying([1_000_000, 0]));
    expect(first.fee).toBe(2_000n);
    await refusedWith(saying([0, 1_000_000]), 'input_amount_mismatch');
    // Its one answer is no transaction: input 1's signature commits to 0 sat.
    expect(btc.submit(first.rawTransaction)).toMatchObject({ accepted: false });
    // Saying the first amounts again is the same transaction answered again (a processor asking after a crash).
    expect((await client.signUtxoTransaction(saying([1_000_000, 0]))).rawTransaction).toBe(first.rawTransaction);
    const [bound] = await db.owner<{ input_amounts: string[] }[]>`select input_amounts::text[] from signer.utxo_payout_signatures where payout_id = ${payout.id}`;
    expect(bound!.input_amounts).toEqual([a, b].map((c) => `${c.txid}:${c.vout}`).sort().map((o) => (o === `${a.txid}:${a.vout}` ? '1000000' : '0')));
  });

  it('two payouts of one address and amount, each listed by one request for the same transaction: the outpoint\'s first amount binds the second', async () => {
    const a = deposit(1_000_000);
    const b = deposit(1_000_000);
    const address = strangerAddress(btc);
    const p = await btcPayout('0.001', { address });
    // The same script in another spelling (upper-case bech32).
    const q = await btcPayout('0.001', { address: address.toUpperCase() });
    const outputs = [{ address, value: 100_000 }, { address: testAddress(btc, 'bitcoin', 1, 5), value: 898_000 }];
    const saying = (payoutId: string, amounts: [number, number]) =>
      utxoRequest({
        psbt: unsignedPsbt(btc, 'bitcoin', { coins: [{ ...a, value: amounts[0] }, { ...b, value: amounts[1] }], outputs }),
        coins: [a, b],
        payouts: [{ payoutId, outputIndex: 0 }],
        change: { outputIndex: 1, addressIndex: 5 },
      });
    expect((await client.signUtxoTransaction(saying(p.id, [1_000_000, 0]))).fee).toBe(2_000n);
    await refusedWith(saying(q.id, [0, 1_000_000]), 'input_amount_mismatch');
    // Q stays unbound: nothing was signed for it.
    expect(await db.owner`select 1 from signer.utxo_payout_signatures where payout_id = ${q.id}`).toEqual([]);
  });

  it('an honest replacement says the same amounts and is signed', async () => {
    const { payout, coin, request } = await ordinary(1_500);
    await client.signUtxoTransaction(request);
    const replacement = (value: number, fee: number) =>
      utxoRequest({
        psbt: unsignedPsbt(btc, 'bitcoin', { coins: [{ ...coin, value }], outputs: [{ address: payout.address, value: 100_000 }, { address: testAddress(btc, 'bitcoin', 1, 3), value: coin.value - 100_000 - fee }] }),
        coins: [coin],
        payouts: [{ payoutId: payout.id, outputIndex: 0 }],
        change: { outputIndex: 1, addressIndex: 3 },
      });
    // A replacement claiming more in the input than the first request said (its fee would look higher).
    await refusedWith(replacement(coin.value + 5_000, 1_500), 'input_amount_mismatch');
    const signed = await client.signUtxoTransaction(replacement(coin.value, 3_000));
    expect(btc.submit(signed.rawTransaction)).toMatchObject({ accepted: true });
  });
});

describe('Litecoin limits', () => {
  const ltcPayout = (amount: string) => insertPayout(db.owner, { asset: 'LTC', network: 'litecoin', amount, address: strangerAddress(ltc) });
  const ltcRequest = (payout: { id: string; address: string }, coin: Coin, value: number, fee: number) =>
    utxoRequest({
      network: 'litecoin',
      psbt: unsignedPsbt(ltc, 'litecoin', { coins: [coin], outputs: [{ address: payout.address, value }, { address: testAddress(ltc, 'litecoin', 1, 0), value: coin.value - value - fee }] }),
      coins: [coin],
      payouts: [{ payoutId: payout.id, outputIndex: 0 }],
      change: { outputIndex: 1, addressIndex: 0 },
    });

  it('signs an exact Litecoin payout, then refuses above the daily total and the daily fee budget; a replacement adds only its fee increase', async () => {
    const a = await ltcPayout('0.002');
    const coinA = deposit(1_000_000, ltc, 'litecoin');
    const signed = await client.signUtxoTransaction(ltcRequest(a, coinA, 200_000, 10_000));
    expect(ltc.submit(signed.rawTransaction)).toMatchObject({ accepted: true });

    // 0.002 + 0.002 LTC > SIGNER_DAILY_LIMIT_LTC 0.003.
    const b = await ltcPayout('0.002');
    await refusedWith(ltcRequest(b, deposit(1_000_000, ltc, 'litecoin'), 200_000, 1_000), 'daily_limit_exceeded');
    // 10,000 + 25,000 litoshi of fees > SIGNER_DAILY_FEE_LIMIT_LTC 30,000.
    const c = await ltcPayout('0.001');
    await refusedWith(ltcRequest(c, deposit(1_000_000, ltc, 'litecoin'), 100_000, 25_000), 'daily_fee_budget_exceeded');
    // A's replacement at 28,000 adds 18,000: within the budget (10,000 + 18,000).
    const replacement = await client.signUtxoTransaction(ltcRequest(a, coinA, 200_000, 28_000));
    expect(ltc.submit(replacement.rawTransaction)).toMatchObject({ accepted: true });
    const [fees] = await db.owner<{ fee: string }[]>`select fee::text from signer.utxo_daily_fees where coin = 'LTC'`;
    expect(fees).toEqual({ fee: '28000' });
  });
});
