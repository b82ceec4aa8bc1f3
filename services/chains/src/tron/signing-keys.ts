/**
 * The payout signer's Tron keys (docs/treasury.md#tron): the account m/44'/195'/0' of the seed
 * (INVOICE_XPUB_TRX is its xpub), its treasury key account/1/0, and signatures over a
 * transaction id. The private key stays in a private field (#): never logged, stored or shown.
 */
import { HDKey } from '@scure/bip32';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { keyMaterialOf } from '../account-key';
import { accountKeyOfMnemonic, readSeedFile } from '../evm/signing-keys';
import { TREASURY_BRANCH, TREASURY_INDEX } from '../evm/treasury';
import { tronAddress } from './address';

/** The BIP44 account of TRX and the TRC-20 tokens (the invoice service's INVOICE_XPUB_TRX). */
export const TRON_ACCOUNT_PATH = "m/44'/195'/0'";

export class TronSigningKeys {
  readonly #treasuryKey: Uint8Array;
  /** Identity of the account key, as INVOICE_XPUB_TRX must have it. */
  readonly accountKeyMaterial: string;
  readonly accountXpub: string;
  /** base58 "T…" address of account/1/0. */
  readonly treasuryAddress: string;

  private constructor(account: HDKey) {
    this.accountKeyMaterial = keyMaterialOf(account);
    this.accountXpub = account.publicExtendedKey;
    const treasury = account.deriveChild(TREASURY_BRANCH).deriveChild(TREASURY_INDEX);
    if (!treasury.privateKey || !treasury.publicKey) throw new Error('a derived key has no private key');
    this.#treasuryKey = Uint8Array.from(treasury.privateKey);
    this.treasuryAddress = tronAddress(treasury.publicKey);
    treasury.wipePrivateData();
  }

  static fromSeedFile(file: string, variable = 'SIGNER_SEED_FILE'): TronSigningKeys {
    return TronSigningKeys.fromMnemonic(readSeedFile(file, variable), `${variable} ${file}`);
  }

  static fromMnemonic(text: string, source = 'the mnemonic'): TronSigningKeys {
    const account = accountKeyOfMnemonic(text, source, TRON_ACCOUNT_PATH);
    const keys = new TronSigningKeys(account);
    account.wipePrivateData();
    return keys;
  }

  /**
   * The treasury's signature of a transaction id (32 bytes, hex): r ‖ s ‖ v with v = 27 + recovery
   * id, 65 bytes hex. Deterministic (RFC 6979) and low-s. java-tron recovers with recid = v − 27
   * when v ≥ 27 (SignUtils / ECKey.signatureToAddress), so 27/28 and 0/1 are both accepted;
   * TronWeb and the Tron wallets send 27/28 as well (docs/treasury.md#tron).
   */
  signTxid(txid: string): string {
    if (!/^[0-9a-f]{64}$/.test(txid)) throw new Error('a transaction id is 32 bytes of lower-case hex');
    // 'recovered': recovery id ‖ r ‖ s; the digest is signed as given (prehash off: it is already sha256).
    const signature = secp256k1.sign(Buffer.from(txid, 'hex'), this.#treasuryKey, { prehash: false, format: 'recovered', lowS: true });
    const recovery = signature[0]!;
    return Buffer.from([...signature.slice(1), 27 + recovery]).toString('hex');
  }

  toJSON(): { treasuryAddress: string } {
    return { treasuryAddress: this.treasuryAddress };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `TronSigningKeys(treasury ${this.treasuryAddress})`;
  }
}
