/**
 * Issue 25, done-when 2: the Esplora stand-in's signature check is real. The real signer signs a
 * two-input payout; the same transaction with the inputs' keys resolved wrongly (input 0 signed
 * with the key of another index, or the two inputs' keys swapped) is what a signer with a broken
 * key lookup would send. The stand-in refuses each such mutant at `POST /tx` (as bitcoind does,
 * mandatory-script-verify-flag-failed) and accepts the signer's own transaction.
 */
import * as ecc from '@bitcoinerlab/secp256k1';
import type { Client } from '@connectrpc/connect';
import { createRpcClient } from '@coinvoice/runtime';
import { SignerService } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import * as bitcoin from 'bitcoinjs-lib';
import { EsploraStandIn } from '../../invoice/test/support/esplora-stand-in';
import { insertPayout, prepareSignerDatabase, startTestSigner, type SignerDatabase, type TestSigner } from './support/signer';
import { fundKey, strangerAddress, testAddress, testPrivateKey, testPublicKey, unsignedPsbt, utxoRequest, type Coin } from './support/utxo-signer';

let db: SignerDatabase;
let signer: TestSigner;
let client: Client<typeof SignerService>;
let standIn: EsploraStandIn;

beforeAll(async () => {
  db = await prepareSignerDatabase();
  signer = await startTestSigner({ databaseUrl: db.signerUrl, ownerDatabaseUrl: db.database.url });
  client = createRpcClient(SignerService, signer.url, { timeoutMs: 15_000 });
  standIn = await EsploraStandIn.start(bitcoin.networks.bitcoin);
}, 60_000);

afterAll(async () => {
  await signer?.stop();
  await db?.dispose();
  await standIn?.close();
});

/** Input `index` of `raw` re-signed (SIGHASH_ALL, BIP143) with the key account/0/`keyIndex`, its witness naming `pubkeyIndex`'s key. */
function resigned(raw: string, coins: Coin[], index: number, keyIndex: number, pubkeyIndex = coins[index]!.index): string {
  const tx = bitcoin.Transaction.fromHex(raw);
  const coin = coins[index]!;
  const scriptCode = bitcoin.payments.p2pkh({ hash: bitcoin.crypto.hash160(testPublicKey('bitcoin', 0, coin.index)) }).output!;
  const sighash = tx.hashForWitnessV0(index, scriptCode, BigInt(coin.value), bitcoin.Transaction.SIGHASH_ALL);
  const signature = bitcoin.script.signature.encode(Buffer.from(ecc.sign(sighash, testPrivateKey('bitcoin', 0, keyIndex))), bitcoin.Transaction.SIGHASH_ALL);
  tx.ins[index]!.witness = [Buffer.from(signature), testPublicKey('bitcoin', 0, pubkeyIndex)];
  return tx.toHex();
}

it('refuses a transaction whose input is signed with the wrong key, and accepts the signer’s own', async () => {
  const coins = [fundKey(standIn, 'bitcoin', 0, 7, 80_000), fundKey(standIn, 'bitcoin', 0, 8, 60_000)];
  const payout = await insertPayout(db.owner, { asset: 'BTC', network: 'bitcoin', amount: '0.001', address: strangerAddress(standIn) });
  const psbt = unsignedPsbt(standIn, 'bitcoin', {
    coins,
    outputs: [
      { address: payout.address, value: 100_000 },
      { address: testAddress(standIn, 'bitcoin', 1, 2), value: 140_000 - 100_000 - 2_000 },
    ],
  });
  const signed = await client.signUtxoTransaction(
    utxoRequest({ psbt, coins, payouts: [{ payoutId: payout.id, outputIndex: 0 }], change: { outputIndex: 1, addressIndex: 2 } }),
  );

  // The harness's re-signing is faithful: input 0 re-signed with its own key is still accepted by
  // the judge below (checked last, once the mutants are refused, as the spend it is).
  const faithful = resigned(signed.rawTransaction, coins, 0, 7);

  const mutants = {
    // Key of another index, witness naming the right public key: the signature does not verify.
    'signed by account/0/9': resigned(signed.rawTransaction, coins, 0, 9),
    // The wrong key throughout: its public key is not the spent output's program.
    'signed and named by account/0/9': resigned(signed.rawTransaction, coins, 0, 9, 9),
    // The two inputs' keys swapped.
    'keys swapped': resigned(resigned(signed.rawTransaction, coins, 0, 8), coins, 1, 7),
  };
  for (const [name, raw] of Object.entries(mutants)) {
    const attempt = standIn.submit(raw);
    expect({ name, accepted: attempt.accepted }).toEqual({ name, accepted: false });
    expect(attempt.reason).toMatch(/"code":-26,"message":"mandatory-script-verify-flag-failed \((Signature must be zero|Witness program hash mismatch)/);
  }
  expect(standIn.mempool.size).toBe(0);

  expect(standIn.submit(signed.rawTransaction)).toMatchObject({ accepted: true, txid: signed.txid });
  expect(standIn.mempool.has(signed.txid)).toBe(true);
  // RFC6979 signatures: the faithful re-signature is byte for byte the signer's.
  expect(faithful).toBe(signed.rawTransaction);
});
