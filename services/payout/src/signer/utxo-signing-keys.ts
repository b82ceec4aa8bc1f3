/**
 * The payout signer's Bitcoin and Litecoin keys (docs/treasury.md#utxo-signer-policy): the BIP84
 * account of the seed (m/84'/0'/0' Bitcoin, m/84'/2'/0' Litecoin, mainnet), its deposit keys
 * account/0/i and the treasury's change keys account/1/i, and signing of a PSBT's P2WPKH inputs
 * with them (BIP143, SIGHASH_ALL, RFC6979 deterministic signatures: the same PSBT signs to the same
 * bytes). The mnemonic, the seed and every private key stay inside this module, in private fields;
 * nothing here is logged or put in an error message.
 *
 * Kept in the signer's package: only the `payout sign` role imports it.
 */
import { HDKey } from '@scure/bip32';
import { Address, OutScript, SigHash, Transaction } from '@scure/btc-signer';
import { keyMaterialOf } from '@coinvoice/chains/account-key';
import { accountKeyOfMnemonic, readSeedFile } from '@coinvoice/chains/evm/signing-keys';
import { hash160, p2wpkhAddress } from '@coinvoice/chains/utxo/address';
import { BECH32_HRP } from '@coinvoice/chains/utxo/coins';

export type UtxoTreasuryNetwork = 'bitcoin' | 'litecoin';

/** BIP84 account paths (SLIP-44 coin types 0 and 2): what INVOICE_XPUB_BTC / INVOICE_XPUB_LTC must be. */
export const UTXO_ACCOUNT_PATHS: Readonly<Record<UtxoTreasuryNetwork, string>> = {
  bitcoin: "m/84'/0'/0'",
  litecoin: "m/84'/2'/0'",
};

/** Branch 0: receive (the invoices' deposit addresses); branch 1: the treasury's change. */
export type UtxoBranch = 0 | 1;

/** Where an input's key sits under the account. */
export interface UtxoKeyPath {
  branch: UtxoBranch;
  index: number;
}

/** Address parameters of the mainnets (base58 versions for legacy destinations, bech32 hrp). */
const ADDRESS_NETWORKS: Readonly<Record<UtxoTreasuryNetwork, { bech32: string; pubKeyHash: number; scriptHash: number; wif: number }>> = {
  bitcoin: { bech32: BECH32_HRP.bitcoin.mainnet, pubKeyHash: 0x00, scriptHash: 0x05, wif: 0x80 },
  litecoin: { bech32: BECH32_HRP.litecoin.mainnet, pubKeyHash: 0x30, scriptHash: 0x32, wif: 0xb0 },
};

/** The P2WPKH output script (OP_0 <hash160(pubkey)>) of a compressed public key. */
export function p2wpkhScriptOf(publicKey: Uint8Array): Uint8Array {
  return OutScript.encode({ type: 'wpkh', hash: hash160(publicKey) });
}

/** The output script that pays `address` on `network`'s mainnet; undefined if it is no address there. */
export function outputScriptOfAddress(network: UtxoTreasuryNetwork, address: string): Uint8Array | undefined {
  try {
    return OutScript.encode(Address(ADDRESS_NETWORKS[network]).decode(address));
  } catch {
    return undefined;
  }
}

/** The keys of one network's account. */
export class UtxoSigningKeys {
  readonly #account: HDKey;
  readonly network: UtxoTreasuryNetwork;
  /** Identity of the account key (chain code + public key), as INVOICE_XPUB_<COIN> must have it. */
  readonly accountKeyMaterial: string;
  /**
   * The account's extended PUBLIC key, serialized with BIP32 mainnet versions ("xpub…", whatever the
   * coin): what INVOICE_XPUB_BTC/_LTC may be set to, and what GetTreasury answers as account_xpub
   * (parseExtendedPublicKey reads it).
   */
  readonly accountXpub: string;
  /** account/1/0, bech32 (bc1…, ltc1…). */
  readonly treasuryAddress: string;

  private constructor(network: UtxoTreasuryNetwork, account: HDKey) {
    this.network = network;
    this.#account = account;
    this.accountKeyMaterial = keyMaterialOf(account);
    this.accountXpub = account.publicExtendedKey;
    this.treasuryAddress = this.address({ branch: 1, index: 0 });
  }

  static fromSeedFile(network: UtxoTreasuryNetwork, file: string, variable = 'SIGNER_SEED_FILE'): UtxoSigningKeys {
    return UtxoSigningKeys.fromMnemonic(network, readSeedFile(file, variable), `${variable} ${file}`);
  }

  static fromMnemonic(network: UtxoTreasuryNetwork, text: string, source = 'the mnemonic'): UtxoSigningKeys {
    return new UtxoSigningKeys(network, accountKeyOfMnemonic(text, source, UTXO_ACCOUNT_PATHS[network]));
  }

  private child(path: UtxoKeyPath): HDKey {
    return this.#account.deriveChild(path.branch).deriveChild(path.index);
  }

  /** The bech32 P2WPKH address of account/branch/index. */
  address(path: UtxoKeyPath): string {
    return p2wpkhAddress(this.publicKey(path), BECH32_HRP[this.network].mainnet);
  }

  /** The P2WPKH output script of account/branch/index. */
  script(path: UtxoKeyPath): Uint8Array {
    return p2wpkhScriptOf(this.publicKey(path));
  }

  private publicKey(path: UtxoKeyPath): Uint8Array {
    const child = this.child(path);
    const publicKey = child.publicKey!;
    child.wipePrivateData();
    return publicKey;
  }

  /**
   * Signs input i of `tx` with keys[i] (SIGHASH_ALL) and finalizes every input. The caller has
   * checked that each input's witness_utxo is the P2WPKH output of its key.
   */
  signAll(tx: Transaction, keys: readonly UtxoKeyPath[]): void {
    keys.forEach((path, i) => {
      const child = this.child(path);
      try {
        tx.signIdx(child.privateKey!, i, [SigHash.ALL]);
      } finally {
        child.wipePrivateData();
      }
    });
    tx.finalize();
  }

  toJSON(): { network: string; treasuryAddress: string } {
    return { network: this.network, treasuryAddress: this.treasuryAddress };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `UtxoSigningKeys(${this.network}, treasury ${this.treasuryAddress})`;
  }
}
