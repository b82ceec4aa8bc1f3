/**
 * Payment addresses (docs/architecture.md#addresses): derived per invoice from an account-level extended public key
 * (BIP32) at child 0/index — the BIP44 external (receive) chain — and encoded by the coin's family
 * (utxo/address.ts: P2WPKH bech32; evm/address.ts: EIP-55 hex; tron/address.ts: base58check).
 * Same key, same index, same address. `validateAddress` is independent of derivation and is meant
 * for any address that reaches the service (e.g. payout destinations).
 */
import { hash } from 'node:crypto';
import { randomBytes } from '@noble/hashes/utils.js';
import { HARDENED_OFFSET, HDKey, type Versions } from '@scure/bip32';
import { ok, refused, type Parsed } from '@coinvoice/domain/money';
import type { Network } from '@coinvoice/domain/project-network';
import { base58check } from './base58check';
import { cryptoCurrency, familyOf } from './currencies';
import type { CryptoCode } from './coin';
import { secp256k1Points } from './secp256k1';

/**
 * Extended key serializations accepted for configured keys, by 4-byte version. Only the version
 * differs between them (SLIP-132); the key material is read the same way. Private versions are
 * listed so they can be refused by name: the service only ever holds public keys.
 */
const EXTENDED_KEY_VERSIONS: ReadonlyArray<{ prefix: string; network: Network; public: number; private: number }> = [
  { prefix: 'xpub', network: 'mainnet', public: 0x0488b21e, private: 0x0488ade4 }, // BIP32 mainnet
  { prefix: 'tpub', network: 'testnet', public: 0x043587cf, private: 0x04358394 }, // BIP32 testnet
  { prefix: 'zpub', network: 'mainnet', public: 0x04b24746, private: 0x04b2430c }, // BIP84 mainnet
  { prefix: 'vpub', network: 'testnet', public: 0x045f1cf6, private: 0x045f18bc }, // BIP84 testnet
  { prefix: 'Ltub', network: 'mainnet', public: 0x019da462, private: 0x019d9cfe }, // Litecoin mainnet
  { prefix: 'ttub', network: 'testnet', public: 0x0436f6e1, private: 0x0436ef7d }, // Litecoin testnet
];
const ACCEPTED_KEY_PREFIXES = EXTENDED_KEY_VERSIONS.map((v) => v.prefix).join(', ');

/** The serialization prefixes of a network's extended public keys (SLIP-132 included): xpub, zpub, Ltub on mainnet. */
export function extendedPublicKeyPrefixes(network: Network): readonly string[] {
  return EXTENDED_KEY_VERSIONS.filter((v) => v.network === network).map((v) => v.prefix);
}

const BIP32_MAINNET: Versions = { public: 0x0488b21e, private: 0x0488ade4 };
const BIP32_TESTNET: Versions = { public: 0x043587cf, private: 0x04358394 };

/**
 * Parses a configured account-level extended PUBLIC key (xpub, tpub, zpub, vpub, Ltub, ttub).
 * Refuses private keys, unknown versions and anything malformed, with a reason.
 */
export function parseExtendedPublicKey(key: unknown): Parsed<HDKey> {
  if (typeof key !== 'string' || key.length === 0 || key.length > 200) return refused('must be an extended public key string');
  let payload: Uint8Array;
  try {
    payload = base58check.decode(key);
  } catch {
    return refused('is not a valid base58check extended key');
  }
  if (payload.length !== 78) return refused('is not an extended key (wrong length)');
  const version = new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0);
  const known = EXTENDED_KEY_VERSIONS.find((v) => v.public === version || v.private === version);
  if (!known) return refused(`has an unknown version; accepted: ${ACCEPTED_KEY_PREFIXES}`);
  if (known.private === version) return refused('is an extended PRIVATE key; configure only the extended public key');
  try {
    return ok(HDKey.fromExtendedKey(key, { public: known.public, private: known.private }));
  } catch {
    return refused('is not a valid extended public key');
  }
}

/** SHA-512's block size: HMAC pads its key to one block. */
const SHA512_BLOCK_BYTES = 128;

/**
 * BIP32 CKDpub from one parent node, for many non-hardened indexes: I = HMAC-SHA512(chain code,
 * serP(K) ‖ ser32(index)), child = K + parse256(I_L)·G. @scure/bip32's deriveChild computes the
 * same on @noble/curves at ~1 ms; this runs on libsecp256k1 (./secp256k1) and node's SHA-512 with
 * the HMAC's constant parts built once: (key ⊕ ipad) ‖ serP(K) ‖ index, then (key ⊕ opad) ‖ inner
 * digest, where only the index and the inner digest change (rewritten in place: it is synchronous).
 * Only the child's public key is computed (addresses need no grandchildren).
 */
export class PublicChildDeriver {
  /** The parent point, uncompressed once here so no derivation pays for its square root. */
  private readonly parentPoint: Uint8Array;
  private readonly innerMessage: Buffer;
  private readonly outerMessage: Buffer;

  constructor(parent: HDKey) {
    if (!parent.publicKey || !parent.chainCode) throw new Error('the parent key has no public key or chain code');
    this.parentPoint = secp256k1Points.uncompress(parent.publicKey);
    this.innerMessage = Buffer.alloc(SHA512_BLOCK_BYTES + 33 + 4);
    this.outerMessage = Buffer.alloc(SHA512_BLOCK_BYTES + 64);
    for (let i = 0; i < SHA512_BLOCK_BYTES; i++) {
      const keyByte = parent.chainCode[i] ?? 0; // the 32-byte chain code is shorter than a block: zero-padded
      this.innerMessage[i] = keyByte ^ 0x36;
      this.outerMessage[i] = keyByte ^ 0x5c;
    }
    this.innerMessage.set(parent.publicKey, SHA512_BLOCK_BYTES);
  }

  /** The public key of non-hardened child `index` (0 ≤ index < 2^31), compressed unless asked not to. */
  childPublicKey(index: number, compressed = true): Uint8Array {
    if (!Number.isSafeInteger(index) || index < 0 || index >= HARDENED_OFFSET) {
      throw new RangeError(`address index must be an integer in [0, 2^31), got ${index}`);
    }
    this.innerMessage.writeUInt32BE(index, SHA512_BLOCK_BYTES + 33);
    this.outerMessage.set(hash('sha512', this.innerMessage, 'buffer'), SHA512_BLOCK_BYTES);
    const tweak = hash('sha512', this.outerMessage, 'buffer').subarray(0, 32);
    // An invalid I_L (≥ n, or a sum at infinity) has probability < 2^-127; BIP32 says to skip such
    // an index, and like @scure/bip32 this refuses it instead of silently answering another one.
    return secp256k1Points.tweakAdd(this.parentPoint, tweak, compressed);
  }
}

/** Derives invoice addresses of one coin and network from one account key. */
export class AddressDeriver {
  /** The external (receive) chain node m/…/account'/0, derived once. */
  private readonly receiveChain: PublicChildDeriver;
  /** Ethereum and Tron hash the uncompressed key: derive it in that form rather than convert. */
  private readonly compressedKeys: boolean;

  constructor(
    accountKey: HDKey,
    readonly currency: CryptoCode,
    readonly network: Network,
  ) {
    this.receiveChain = new PublicChildDeriver(accountKey.deriveChild(0));
    this.compressedKeys = familyOf(cryptoCurrency(currency).chain).compressedKeys;
  }

  /** The address at receive index `index` (0 ≤ index < 2^31): account/0/index. */
  addressAt(index: number): string {
    return addressFromPublicKey(this.receiveChain.childPublicKey(index, this.compressedKeys), this.currency, this.network);
  }
}

/** Parses the configured account key and returns a deriver for it, or the reason it is unusable. */
export function createAddressDeriver(accountXpub: unknown, currency: CryptoCode, network: Network): Parsed<AddressDeriver> {
  const key = parseExtendedPublicKey(accountXpub);
  return key.ok ? ok(new AddressDeriver(key.value, currency, network)) : key;
}

/**
 * The address of a secp256k1 public key for a coin and network: compressed (33 bytes) for Bitcoin
 * and Litecoin; Ethereum and Tron take either form.
 */
export function addressFromPublicKey(publicKey: Uint8Array, currency: CryptoCode, network: Network): string {
  const coin = cryptoCurrency(currency);
  return familyOf(coin.chain).encodeAddress(publicKey, coin, network);
}

/** Validates an address for a coin and network, answering its canonical form or a reason. */
export function validateAddress(currency: CryptoCode, network: Network, address: unknown): Parsed<string> {
  const coin = cryptoCurrency(currency);
  return familyOf(coin.chain).validateAddress(address, coin, network);
}

/** A development key pair for one coin and network, for when no account key is configured. */
export interface DevelopmentKeyPair {
  readonly currency: CryptoCode;
  readonly network: Network;
  /** BIP44 path of the account key from the random seed, e.g. m/84'/0'/0'. */
  readonly path: string;
  /** The account extended PRIVATE key: a secret, kept only so development funds are recoverable. */
  readonly xprv: string;
  /** The account extended public key the service derives invoice addresses from. */
  readonly xpub: string;
}

/**
 * Generates an account key pair from a fresh random 32-byte seed (or a given one, for tests) at
 * m/purpose'/coin'/0' — coin type 1 on testnets (BIP44) — serialized with the plain BIP32 versions
 * (xprv/xpub on mainnet, tprv/tpub on testnet).
 */
export function generateDevelopmentKeyPair(currency: CryptoCode, network: Network, seed: Uint8Array = randomBytes(32)): DevelopmentKeyPair {
  const coin = cryptoCurrency(currency);
  const coinType = network === 'testnet' ? 1 : coin.bip44CoinType;
  const path = `m/${coin.derivationPurpose}'/${coinType}'/0'`;
  const account = HDKey.fromMasterSeed(seed, network === 'testnet' ? BIP32_TESTNET : BIP32_MAINNET).derive(path);
  return { currency, network, path, xprv: account.privateExtendedKey, xpub: account.publicExtendedKey };
}

