/**
 * What the UTXO signer tests share: the test seed's BIP84 keys (derived here, independently of the
 * signer's code), funding them on the Esplora stand-in, and unsigned PSBTs built with bitcoinjs-lib
 * (another library than the signer's @scure/btc-signer) as the processor hands them over.
 */
import * as bitcoin from 'bitcoinjs-lib';
import { create } from '@bufbuild/protobuf';
import { SignUtxoTransactionRequestSchema, type SignUtxoTransactionRequest } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import type { EsploraStandIn } from '../../../invoice/test/support/esplora-stand-in';
import { testUtxoAccount } from './signer';

export type UtxoNetwork = 'bitcoin' | 'litecoin';

/** The public key of account/branch/index of the test seed. */
export function testPublicKey(network: UtxoNetwork, branch: number, index: number): Buffer {
  return Buffer.from(testUtxoAccount(network).deriveChild(branch).deriveChild(index).publicKey!);
}

/** The private key of account/branch/index of the test seed (for the mutation test's wrong signature). */
export function testPrivateKey(network: UtxoNetwork, branch: number, index: number): Buffer {
  return Buffer.from(testUtxoAccount(network).deriveChild(branch).deriveChild(index).privateKey!);
}

export function testAddress(standIn: EsploraStandIn, network: UtxoNetwork, branch: number, index: number): string {
  return bitcoin.payments.p2wpkh({ pubkey: testPublicKey(network, branch, index), network: standIn.network }).address!;
}

/** A deposit (or change) output of the test seed's key, mined on the stand-in. */
export interface Coin {
  txid: string;
  vout: number;
  value: number;
  branch: number;
  index: number;
}

/** Pays `value` sat to account/branch/index from a stranger, mined: an accounted, confirmed coin. */
export function fundKey(standIn: EsploraStandIn, network: UtxoNetwork, branch: number, index: number, value: number): Coin {
  const payer = standIn.fundedPayer(value + 50_000, 1);
  const address = testAddress(standIn, network, branch, index);
  const tx = standIn.pay(payer, [{ address, value }]);
  standIn.mine([tx]);
  return { txid: tx.txid, vout: 0, value, branch, index };
}

export interface UnsignedSpend {
  coins: Coin[];
  outputs: Array<{ address: string; value: number }>;
  /** Default 0xfffffffd (BIP125). */
  sequence?: number;
  /** Leave witness_utxo out of this input. */
  withoutWitnessUtxo?: number;
}

/** The base64 PSBT v0 of a spend, every input with its witness_utxo unless told otherwise. */
export function unsignedPsbt(standIn: EsploraStandIn, network: UtxoNetwork, spend: UnsignedSpend): string {
  const psbt = new bitcoin.Psbt({ network: standIn.network });
  psbt.setVersion(2);
  spend.coins.forEach((coin, i) => {
    const script = bitcoin.payments.p2wpkh({ pubkey: testPublicKey(network, coin.branch, coin.index) }).output!;
    psbt.addInput({
      hash: coin.txid,
      index: coin.vout,
      sequence: spend.sequence ?? 0xfffffffd,
      ...(spend.withoutWitnessUtxo === i ? {} : { witnessUtxo: { script, value: BigInt(coin.value) } }),
    });
  });
  for (const output of spend.outputs) psbt.addOutput({ address: output.address, value: BigInt(output.value) });
  return psbt.toBase64();
}

export function utxoRequest(fields: {
  network?: string;
  psbt: string;
  coins: Coin[];
  payouts: Array<{ payoutId: string; outputIndex: number }>;
  change?: { outputIndex: number; addressIndex: number };
}): SignUtxoTransactionRequest {
  return create(SignUtxoTransactionRequestSchema, {
    network: fields.network ?? 'bitcoin',
    psbt: fields.psbt,
    inputKeys: fields.coins.map((c) => ({ branch: c.branch, index: c.index })),
    payouts: fields.payouts,
    ...(fields.change ? { changeOutputIndex: fields.change.outputIndex, changeAddressIndex: fields.change.addressIndex } : {}),
  });
}

/** A fresh P2WPKH destination nobody in the test holds (a merchant's payout address). */
export function strangerAddress(standIn: EsploraStandIn): string {
  return bitcoin.payments.p2wpkh({ hash: Buffer.from(crypto.getRandomValues(new Uint8Array(20))), network: standIn.network }).address!;
}
