/**
 * Issue 25, the Tron treasury's signer (docs/treasury.md#tron): the `sign` role in this process as
 * its restricted database role, the test seed's Tron account configured (INVOICE_XPUB_TRX), and
 * the Tron stand-in building and judging the transactions. What the signer signs pays exactly the
 * named payout when broadcast (TRX in sun; USDT in token units, seen in the Transfer log); the
 * stand-in refuses a transaction signed by another key (its check is real); every rule refuses with
 * PermissionDenied naming it, audited in signer.audit_log.
 */
import { create } from '@bufbuild/protobuf';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { Code, createRpcClient } from '@coinvoice/runtime';
import { SignerService, SignTronTransactionRequestSchema } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { rejection, sleep } from '../../../test/support/async';
import { TronStandIn, tronHex } from '../../invoice/test/support/tron-stand-in';
import { decodeWireRaw, encodeWireRaw } from '../../invoice/test/support/tron-wire';
import { insertPayout, prepareSignerDatabase, startTestSigner, type SignerDatabase, type TestSigner } from './support/signer';
import { broadcast, createTrc20Transfer, createTrxTransfer, freshTronAddress, TEST_TRON_TREASURY, TEST_TRON_XPUB, tronCall, type NodeTransaction } from './support/tron';

const USDT = freshTronAddress();
const FEE_LIMIT = 40_000_000;

let tron: TronStandIn;
let db: SignerDatabase;
let signer: TestSigner;
let client: ReturnType<typeof createRpcClient<typeof SignerService>>;

beforeAll(async () => {
  tron = await TronStandIn.start();
  db = await prepareSignerDatabase();
  signer = await startTestSigner({
    databaseUrl: db.signerUrl,
    ownerDatabaseUrl: db.database.url,
    env: {
      INVOICE_XPUB_TRX: TEST_TRON_XPUB,
      CHAIN_TRON_USDT_CONTRACT: USDT,
      SIGNER_MAX_PAYOUT_TRX: '100',
      SIGNER_DAILY_LIMIT_TRX: '1000',
      SIGNER_MAX_FEE_LIMIT_SUN: '50000000',
      SIGNER_TRON_MAX_EXPIRATION: '10m',
    },
  });
  client = createRpcClient(SignerService, signer.url, { timeoutMs: 15_000 });
  tron.fund(TEST_TRON_TREASURY, 10_000_000_000n);
  tron.fundToken(USDT, TEST_TRON_TREASURY, 1_000_000_000n);
}, 60_000);

afterAll(async () => {
  await signer?.stop();
  await db?.dispose();
  await tron?.close();
});

const sign = (payoutId: string, rawDataHex: string, network = 'tron') =>
  client.signTronTransaction(create(SignTronTransactionRequestSchema, { network, purpose: { case: 'payout', value: { payoutId } }, rawDataHex }));

async function auditOf(payoutId: string) {
  return db.owner<{ outcome: string; rule: string | null; network: string; asset: string | null; recipient: string | null; amount: string | null; transactionHash: string | null }[]>`
    select outcome, rule, network, asset, recipient, amount::text, transaction_hash as "transactionHash"
    from signer.audit_log where payout_id = ${payoutId} order by id`;
}

/** The node's transaction with raw_data rewritten (both the bytes and the JSON, as a processor must). */
function rewritten(tx: NodeTransaction, change: (raw: ReturnType<typeof decodeWireRaw>) => void): NodeTransaction {
  const raw = decodeWireRaw(Buffer.from(tx.raw_data_hex, 'hex'));
  change(raw);
  const bytes = encodeWireRaw(raw);
  return { ...tx, raw_data: { ...tx.raw_data, expiration: raw.expiration }, raw_data_hex: bytes.toString('hex'), txID: require('node:crypto').createHash('sha256').update(bytes).digest('hex') };
}

test('GetTreasury(tron) is account/1/0 of m/44\'/195\'/0\'', async () => {
  expect(await client.getTreasury({ network: 'tron' })).toMatchObject({ network: 'tron', address: TEST_TRON_TREASURY });
});

test('a TRX payout arrives exactly: the node builds, the signer signs, the stand-in verifies and mines', async () => {
  const payout = await insertPayout(db.owner, { asset: 'TRX', amount: '12.345678', network: 'tron', address: freshTronAddress() });
  const tx = await createTrxTransfer(tron.url, TEST_TRON_TREASURY, payout.address, 12_345_678n);
  const signed = await sign(payout.id, tx.raw_data_hex);
  expect(signed.txid).toBe(tx.txID);
  expect(signed.from).toBe(TEST_TRON_TREASURY);
  // r ‖ s ‖ v with v = 27 + recovery id.
  expect(signed.signature).toMatch(/^[0-9a-f]{128}(1b|1c)$/);
  expect(await broadcast(tron.url, tx, signed.signature)).toEqual({ result: true, txid: tx.txID });
  tron.mine([]);
  expect(tron.balanceOf(payout.address)).toBe(12_345_678n);
  const info = await tronCall(tron.url, '/wallet/gettransactioninfobyid', { value: tx.txID });
  expect(info).toMatchObject({ id: tx.txID, blockNumber: tron.tip.number });
  // The same bytes again: a retry gets the same (deterministic) signature and is not counted twice.
  expect((await sign(payout.id, tx.raw_data_hex)).signature).toBe(signed.signature);
  expect(await broadcast(tron.url, tx, signed.signature)).toMatchObject({ code: 'DUP_TRANSACTION_ERROR' });
  expect((await auditOf(payout.id)).map((row) => [row.outcome, row.recipient, row.amount, row.transactionHash])).toEqual([
    ['signed', payout.address, '12345678', tx.txID],
    ['signed', payout.address, '12345678', tx.txID],
  ]);
});

test('a TRC-20 USDT payout arrives exactly in token units: the Transfer log names the payout address', async () => {
  const payout = await insertPayout(db.owner, { asset: 'USDT', amount: '250.5', network: 'tron', address: freshTronAddress() });
  const before = tron.balanceOf(TEST_TRON_TREASURY);
  const tx = await createTrc20Transfer(tron.url, USDT, TEST_TRON_TREASURY, payout.address, 250_500_000n, FEE_LIMIT);
  const signed = await sign(payout.id, tx.raw_data_hex);
  expect(await broadcast(tron.url, tx, signed.signature)).toEqual({ result: true, txid: tx.txID });
  tron.mine([]);
  expect(tron.tokenBalanceOf(USDT, payout.address)).toBe(250_500_000n);
  const info = (await tronCall(tron.url, '/wallet/gettransactioninfobyid', { value: tx.txID })) as { receipt: { result: string }; log: Array<{ topics: string[]; data: string }> };
  expect(info.receipt.result).toBe('SUCCESS');
  expect(info.log).toHaveLength(1);
  expect(info.log[0]!.topics[2]).toBe(tronHex(payout.address).slice(2).padStart(64, '0'));
  expect(BigInt(`0x${info.log[0]!.data}`)).toBe(250_500_000n);
  // A new holder's transfer: 130,285 energy burnt at 210 sun, within the fee_limit.
  expect(before - tron.balanceOf(TEST_TRON_TREASURY)).toBe(130_285n * 210n);
});

test('the stand-in refuses a transaction signed by another key, and one whose bytes changed after signing', async () => {
  const payout = await insertPayout(db.owner, { asset: 'TRX', amount: '1', network: 'tron', address: freshTronAddress() });
  const tx = await createTrxTransfer(tron.url, TEST_TRON_TREASURY, payout.address, 1_000_000n);
  const other = secp256k1.sign(Buffer.from(tx.txID, 'hex'), secp256k1.utils.randomSecretKey(), { prehash: false, format: 'recovered' });
  const forged = Buffer.concat([other.subarray(1), Buffer.of(27 + other[0]!)]).toString('hex');
  expect(await broadcast(tron.url, tx, forged)).toMatchObject({ code: 'SIGERROR', txid: tx.txID });
  const signed = await sign(payout.id, tx.raw_data_hex);
  const moreSun = rewritten(tx, (raw) => (raw.amount = 2_000_000n));
  expect(await broadcast(tron.url, { ...moreSun, raw_data: { ...tx.raw_data } }, signed.signature)).toMatchObject({ code: 'OTHER_ERROR' });
  expect(await broadcast(tron.url, { ...tx, txID: moreSun.txID }, signed.signature)).toMatchObject({ code: 'OTHER_ERROR' });
  expect(tron.pendingCount).toBe(0);
  expect(await broadcast(tron.url, tx, signed.signature)).toEqual({ result: true, txid: tx.txID });
  tron.mine([]);
  expect(tron.balanceOf(payout.address)).toBe(1_000_000n);
});

describe('refusals name their rule and are audited', () => {
  async function refused(payoutId: string, rawDataHex: string, network = 'tron') {
    return rejection(sign(payoutId, rawDataHex, network));
  }

  test.each([
    ['destination_mismatch', 'another destination'],
    ['amount_mismatch', 'another amount'],
  ])('%s: %s', async (rule, what) => {
    const payout = await insertPayout(db.owner, { asset: 'TRX', amount: '3', network: 'tron', address: freshTronAddress() });
    const tx = what === 'another destination'
      ? await createTrxTransfer(tron.url, TEST_TRON_TREASURY, freshTronAddress(), 3_000_000n)
      : await createTrxTransfer(tron.url, TEST_TRON_TREASURY, payout.address, 3_000_001n);
    expect(await refused(payout.id, tx.raw_data_hex)).toMatchObject({ connectCode: Code.PermissionDenied, code: rule });
    expect(await auditOf(payout.id)).toEqual([expect.objectContaining({ outcome: 'refused', rule, network: 'tron', asset: 'TRX' })]);
  });

  test('payout_not_signable: not approved by an operator, above PAYOUT_AUTO_MAX_TRX (0 here)', async () => {
    const payout = await insertPayout(db.owner, { asset: 'TRX', amount: '3', network: 'tron', address: freshTronAddress(), approved: false });
    const tx = await createTrxTransfer(tron.url, TEST_TRON_TREASURY, payout.address, 3_000_000n);
    expect(await refused(payout.id, tx.raw_data_hex)).toMatchObject({ connectCode: Code.PermissionDenied, code: 'payout_not_signable', message: expect.stringContaining('is not approved by an operator') });
    expect(await auditOf(payout.id)).toEqual([expect.objectContaining({ outcome: 'refused', rule: 'payout_not_signable', network: 'tron', asset: 'TRX' })]);
  });

  test('another contract than the configured USDT', async () => {
    const payout = await insertPayout(db.owner, { asset: 'USDT', amount: '5', network: 'tron', address: freshTronAddress() });
    const tx = await createTrc20Transfer(tron.url, freshTronAddress(), TEST_TRON_TREASURY, payout.address, 5_000_000n, FEE_LIMIT);
    expect(await refused(payout.id, tx.raw_data_hex)).toMatchObject({ connectCode: Code.PermissionDenied, code: 'destination_mismatch' });
  });

  test('a TRX transfer for a USDT payout, and another asset on tron', async () => {
    const usdt = await insertPayout(db.owner, { asset: 'USDT', amount: '5', network: 'tron', address: freshTronAddress() });
    const trx = await createTrxTransfer(tron.url, TEST_TRON_TREASURY, usdt.address, 5_000_000n);
    expect(await refused(usdt.id, trx.raw_data_hex)).toMatchObject({ code: 'call_data_mismatch' });
    const usdc = await insertPayout(db.owner, { asset: 'USDC', amount: '5', network: 'tron', address: freshTronAddress() });
    expect(await refused(usdc.id, trx.raw_data_hex)).toMatchObject({ code: 'asset_not_supported' });
    const eth = await insertPayout(db.owner, { asset: 'ETH', amount: '5' });
    expect(await refused(eth.id, trx.raw_data_hex)).toMatchObject({ code: 'network_not_supported' });
  });

  test('over the payout limit, and a fee_limit above the cap', async () => {
    const big = await insertPayout(db.owner, { asset: 'TRX', amount: '100.000001', network: 'tron', address: freshTronAddress() });
    const tx = await createTrxTransfer(tron.url, TEST_TRON_TREASURY, big.address, 100_000_001n);
    expect(await refused(big.id, tx.raw_data_hex)).toMatchObject({ code: 'amount_above_limit' });
    const usdt = await insertPayout(db.owner, { asset: 'USDT', amount: '5', network: 'tron', address: freshTronAddress() });
    const call = await createTrc20Transfer(tron.url, USDT, TEST_TRON_TREASURY, usdt.address, 5_000_000n, 50_000_001);
    expect(await refused(usdt.id, call.raw_data_hex)).toMatchObject({ code: 'fee_limit_above_cap' });
  });

  test('not from the treasury, an expiration beyond the window, and bytes it cannot read', async () => {
    const payout = await insertPayout(db.owner, { asset: 'TRX', amount: '2', network: 'tron', address: freshTronAddress() });
    const stranger = freshTronAddress();
    tron.fund(stranger, 5_000_000n);
    const fromStranger = await createTrxTransfer(tron.url, stranger, payout.address, 2_000_000n);
    expect(await refused(payout.id, fromStranger.raw_data_hex)).toMatchObject({ code: 'source_mismatch' });
    const tx = await createTrxTransfer(tron.url, TEST_TRON_TREASURY, payout.address, 2_000_000n);
    const late = rewritten(tx, (raw) => (raw.expiration = Date.now() + 11 * 60_000));
    expect(await refused(payout.id, late.raw_data_hex)).toMatchObject({ code: 'expiration_out_of_window' });
    expect(await refused(payout.id, `${tx.raw_data_hex}5a0100`)).toMatchObject({ connectCode: Code.InvalidArgument, code: 'invalid_request' });
  });

  test('a payout is signed anew only after its earlier transaction expired', async () => {
    const payout = await insertPayout(db.owner, { asset: 'TRX', amount: '4', network: 'tron', address: freshTronAddress() });
    const first = rewritten(await createTrxTransfer(tron.url, TEST_TRON_TREASURY, payout.address, 4_000_000n), (raw) => (raw.expiration = Date.now() + 1_500));
    await sign(payout.id, first.raw_data_hex);
    const second = await createTrxTransfer(tron.url, TEST_TRON_TREASURY, payout.address, 4_000_000n);
    expect(second.txID).not.toBe(first.txID);
    expect(await refused(payout.id, second.raw_data_hex)).toMatchObject({ code: 'resign_before_expiration' });
    await sleep(1_600);
    const again = await sign(payout.id, second.raw_data_hex);
    expect(again.txid).toBe(second.txID);
    expect((await auditOf(payout.id)).map((row) => row.rule ?? row.outcome)).toEqual(['signed', 'resign_before_expiration', 'signed']);
  });
});
