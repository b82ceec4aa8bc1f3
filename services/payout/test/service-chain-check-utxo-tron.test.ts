/**
 * Issue 27: with the watchers' Esplora and Tron sources configured (CHAIN_BITCOIN_ESPLORA_URL,
 * CHAIN_LITECOIN_ESPLORA_URL, CHAIN_TRON_API_URL), Complete of a BTC / LTC / TRX payout checks on
 * chain that the transaction is mined, succeeded and pays the payout's destination exactly its
 * amount in base units, before it debits. The sources are the protocol stand-ins of the watcher
 * tests: real signed bitcoinjs-lib transactions in Esplora's JSON, Tron transactions in the full
 * node's JSON.
 */
import { randomBytes } from 'node:crypto';
import { Code } from '@coinvoice/runtime';
import type { CryptoCode } from '@coinvoice/chains/coin';
import { PayoutStatus } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { EsploraStandIn, LITECOIN } from '../../invoice/test/support/esplora-stand-in';
import { TronStandIn } from '../../invoice/test/support/tron-stand-in';
import { addressFor, balanceOf, codeOf, payoutRequest, rejection, startPayoutHarness, OPERATOR_TOKEN, type Harness } from './support/harness';

let bitcoin: EsploraStandIn;
let litecoin: EsploraStandIn;
let tron: TronStandIn;
let h: Harness;

beforeAll(async () => {
  [bitcoin, litecoin, tron] = await Promise.all([EsploraStandIn.start(), EsploraStandIn.start(LITECOIN), TronStandIn.start()]);
  h = await startPayoutHarness({
    CHAIN_BITCOIN_ESPLORA_URL: bitcoin.url,
    CHAIN_LITECOIN_ESPLORA_URL: litecoin.url,
    CHAIN_TRON_API_URL: tron.url,
    CHAIN_SOURCE_TIMEOUT_MS: '2000',
  });
}, 60_000);

afterAll(async () => {
  await h?.dispose();
  await Promise.all([bitcoin?.close(), litecoin?.close(), tron?.close()]);
});

/** A claimed live payout of `amount` `currency` to a fresh mainnet address. */
async function claimedPayout(currency: CryptoCode, amount: string) {
  const project = h.auth.addProject('live');
  await h.credit(project, currency, '100');
  const request = payoutRequest(project, { currency, amount });
  const { payout } = await h.client.requestPayout(request);
  await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
  await h.client.claimPayout({ payoutId: payout!.id, operatorToken: OPERATOR_TOKEN });
  return { project, payoutId: payout!.id, address: request.address };
}

const complete = (payoutId: string, transactionHash: string) => h.client.completePayout({ payoutId, transactionHash, operatorToken: OPERATOR_TOKEN });

describe.each([
  { currency: 'BTC' as const, source: () => bitcoin },
  { currency: 'LTC' as const, source: () => litecoin },
])('$currency over Esplora', ({ currency, source }) => {
  test('unknown, unmined, short, elsewhere and split-short transactions are refused; outputs to the address adding up to the amount complete', async () => {
    const chain = source();
    const { project, payoutId, address } = await claimedPayout(currency, '0.1234');
    const payer = chain.fundedPayer(50_000_000, 6);

    expect(await rejection(complete(payoutId, randomBytes(32).toString('hex')))).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'transaction_not_found' });
    // In the mempool, not yet mined.
    const right = chain.pay(payer, [{ address, value: 12_340_000 }]);
    chain.broadcast(right);
    expect(await rejection(complete(payoutId, right.txid))).toMatchObject({ code: 'transaction_not_found' });

    // One satoshi short; the right amount to another address; two outputs to the address one satoshi short in sum.
    const short = chain.pay(payer, [{ address, value: 12_339_999 }]);
    const elsewhere = chain.pay(payer, [{ address: addressFor(currency, 'live'), value: 12_340_000 }]);
    const splitShort = chain.pay(payer, [{ address, value: 12_000_000 }, { address, value: 339_999 }]);
    chain.mine([right, short, elsewhere, splitShort]);
    expect(await rejection(complete(payoutId, short.txid))).toMatchObject({
      connectCode: Code.FailedPrecondition,
      code: 'transaction_mismatch',
      violations: [{ field: 'transactionHash', message: expect.stringContaining(`0.12339999 ${currency}`) }],
    });
    expect(await rejection(complete(payoutId, elsewhere.txid))).toMatchObject({ code: 'transaction_mismatch' });
    expect(await rejection(complete(payoutId, splitShort.txid))).toMatchObject({ code: 'transaction_mismatch' });
    expect(await balanceOf(h, project, currency)).toEqual({ available: '99.8766', pending: '0.1234', total: '100' });

    const { payout } = await complete(payoutId, right.txid);
    expect(payout).toMatchObject({ status: PayoutStatus.COMPLETED, transactionHash: right.txid });
    expect(await balanceOf(h, project, currency)).toEqual({ available: '99.8766', pending: '0', total: '99.8766' });

    // Two outputs to the address that add up to the amount pay it too.
    const second = await claimedPayout(currency, '0.05');
    const split = chain.pay(payer, [{ address: second.address, value: 3_000_000 }, { address: second.address, value: 2_000_000 }]);
    chain.mine([split]);
    expect((await complete(second.payoutId, split.txid)).payout!.status).toBe(PayoutStatus.COMPLETED);
  });
});

describe('TRX over the Tron HTTP API', () => {
  test('unknown, unmined, failed, short, elsewhere and TRC-20 transactions are refused; the right TRX transfer completes', async () => {
    const { project, payoutId, address } = await claimedPayout('TRX', '27.5');

    expect(await rejection(complete(payoutId, randomBytes(32).toString('hex')))).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'transaction_not_found' });
    const right = tron.transfer(address, 27_500_000);
    // Built, not in a block: the node does not know it as a transaction yet.
    expect(await rejection(complete(payoutId, right.txID))).toMatchObject({ code: 'transaction_not_found' });

    const failed = tron.transfer(address, 27_500_000, false);
    const short = tron.transfer(address, 27_499_999);
    const elsewhere = tron.transfer(addressFor('TRX', 'live'), 27_500_000);
    // USDT on Tron (TRC-20) to the address, 27.5 in the token's 6 decimals: another asset.
    const token = tron.trc20Transfer('TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', address, 27_500_000);
    tron.mine([right, failed, short, elsewhere, token]);

    expect(await rejection(complete(payoutId, failed.txID))).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'transaction_failed' });
    expect(await rejection(complete(payoutId, short.txID))).toMatchObject({
      code: 'transaction_mismatch',
      violations: [{ field: 'transactionHash', message: expect.stringContaining('27.499999 TRX') }],
    });
    expect(await rejection(complete(payoutId, elsewhere.txID))).toMatchObject({ code: 'transaction_mismatch' });
    expect(await rejection(complete(payoutId, token.txID))).toMatchObject({
      code: 'transaction_mismatch',
      violations: [{ field: 'transactionHash', message: expect.stringContaining('TriggerSmartContract') }],
    });
    expect(await balanceOf(h, project, 'TRX')).toEqual({ available: '72.5', pending: '27.5', total: '100' });

    const { payout } = await complete(payoutId, right.txID);
    expect(payout).toMatchObject({ status: PayoutStatus.COMPLETED, transactionHash: right.txID });
    expect(await balanceOf(h, project, 'TRX')).toEqual({ available: '72.5', pending: '0', total: '72.5' });
  });

  test('an amount in sun past 2^53 is read exactly from the node\'s JSON, not as the nearest double', async () => {
    const project = h.auth.addProject('live');
    await h.credit(project, 'TRX', '20000000000');
    const request = payoutRequest(project, { currency: 'TRX', amount: '10000000000' });
    const { payout } = await h.client.requestPayout(request);
    await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
    await h.client.claimPayout({ payoutId: payout!.id, operatorToken: OPERATOR_TOKEN });
    // 10^16 sun and 10^16 + 1 sun are the same double: only the exact text tells them apart.
    const oneSunMore = tron.transfer(request.address, 0);
    const right = tron.transfer(request.address, 0);
    tron.mine([oneSunMore, right]);
    tron.setAmountText(oneSunMore, '10000000000000001');
    tron.setAmountText(right, '10000000000000000');
    expect(await rejection(complete(payout!.id, oneSunMore.txID))).toMatchObject({ code: 'transaction_mismatch' });
    expect((await complete(payout!.id, right.txID)).payout!.status).toBe(PayoutStatus.COMPLETED);
  });
});

test('a source that cannot be asked is chain_unavailable (503), never a completion', async () => {
  const { project, payoutId, address } = await claimedPayout('BTC', '0.02');
  const payer = bitcoin.fundedPayer(10_000_000, 1);
  const right = bitcoin.pay(payer, [{ address, value: 2_000_000 }]);
  bitcoin.mine([right]);
  bitcoin.down = true;
  try {
    expect(await rejection(complete(payoutId, right.txid))).toMatchObject({ connectCode: Code.Unavailable, code: 'chain_unavailable' });
  } finally {
    bitcoin.down = false;
  }
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '99.98', pending: '0.02', total: '100' });
  expect((await complete(payoutId, right.txid)).payout!.status).toBe(PayoutStatus.COMPLETED);
});

test('the treasury\'s own UTXO batch or Tron transfer completes no other payout by hand, though it pays the address and amount (docs/accounting.md#completing-a-payout-by-hand)', async () => {
  // BTC: a batch version the UTXO processor stored before its broadcast (0600_utxo_treasury.sql),
  // mined, paying this payout's address exactly its amount — for the batch's own payout.
  const btc = await claimedPayout('BTC', '0.03');
  const batchTx = bitcoin.pay(bitcoin.fundedPayer(10_000_000, 1), [{ address: btc.address, value: 3_000_000 }]);
  bitcoin.mine([batchTx]);
  const [batch] = await h.sql<{ id: string }[]>`insert into utxo_batches (network, status) values ('bitcoin', 'open') returning id::text`;
  await h.sql`
    insert into utxo_transactions (batch_id, network, psbt, fee, fee_rate, txid, raw_transaction, status)
    values (${batch!.id}, 'bitcoin', 'cHNidP8B', 1000, 2000, ${batchTx.txid}, ${batchTx.hex}, 'mined')`;
  // Upper case too: the hash is compared as stored.
  for (const spelling of [batchTx.txid, batchTx.txid.toUpperCase()]) {
    expect(await rejection(complete(btc.payoutId, spelling))).toMatchObject({
      connectCode: Code.FailedPrecondition,
      code: 'transaction_already_used',
      message: expect.stringContaining('payout batch'),
    });
  }
  expect(await balanceOf(h, btc.project, 'BTC')).toEqual({ available: '99.97', pending: '0.03', total: '100' });

  // TRX: the Tron processor's transfer for ANOTHER payout of the same address and amount.
  const trx = await claimedPayout('TRX', '12');
  const other = await claimedPayout('TRX', '12');
  const transfer = tron.transfer(trx.address, 12_000_000);
  tron.mine([transfer]);
  await h.sql`
    insert into tron_transactions (payout_id, asset, amount, to_address, txid, raw_data, raw_data_hex, expiration_ms, signature, status)
    values (${other.payoutId}, 'TRX', 12000000, ${trx.address}, ${transfer.txID}, '{}'::jsonb, 'ab', 0, 'cd', 'mined')`;
  expect(await rejection(complete(trx.payoutId, transfer.txID))).toMatchObject({
    code: 'transaction_already_used',
    message: expect.stringContaining('another payout'),
  });
  expect(await balanceOf(h, trx.project, 'TRX')).toEqual({ available: '88', pending: '12', total: '100' });
  // A transfer nobody signed for the treasury still completes it.
  const byHand = tron.transfer(trx.address, 12_000_000);
  tron.mine([byHand]);
  expect((await complete(trx.payoutId, byHand.txID)).payout!.status).toBe(PayoutStatus.COMPLETED);
});
