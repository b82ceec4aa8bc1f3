/**
 * Payment addresses (docs/architecture.md#addresses): derived per invoice from an account-level extended public key
 * (BIP32) at child 0/index — the BIP44 external (receive) chain — encoded per coin:
 * - BTC/LTC: native segwit P2WPKH, bech32 (hrp bc/ltc mainnet, tb/tltc testnet);
 * - ETH/USDT/USDC: EIP-55 checksummed hex of keccak256(uncompressed public key)[12..32];
 * - TRX: base58check of 0x41 + the same 20-byte hash (Shasta/Nile testnets use the same format).
 * Same key, same index, same address. The validators below are independent of derivation and are
 * meant for any address that reaches the service (e.g. payout destinations).
 */
import { hash } from 'node:crypto';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { randomBytes } from '@noble/hashes/utils.js';
import { bech32, createBase58check } from '@scure/base';
import { HARDENED_OFFSET, HDKey, type Versions } from '@scure/bip32';
import { cryptoCurrency, type Chain, type CryptoCode, type Network } from './currencies';
import { ok, refused, type Parsed } from './money';
import { secp256k1Points } from './secp256k1';

// node's SHA-256 (OpenSSL) is about twice @noble/hashes' on these short inputs; same digest.
const base58check = createBase58check((data: Uint8Array) => hash('sha256', data, 'buffer'));

/** bech32 human-readable parts of the UTXO chains. */
export const BECH32_HRP: Readonly<Record<'bitcoin' | 'litecoin', Readonly<Record<Network, string>>>> = {
  bitcoin: { mainnet: 'bc', testnet: 'tb' },
  litecoin: { mainnet: 'ltc', testnet: 'tltc' },
};

/** First byte of every Tron address payload (mainnet and testnets alike). */
export const TRON_ADDRESS_PREFIX = 0x41;

/**
 * Extended key serializations accepted for configured keys, by 4-byte version. Only the version
 * differs between them (SLIP-132); the key material is read the same way. Private versions are
 * listed so they can be refused by name: the service only ever holds public keys.
 */
const EXTENDED_KEY_VERSIONS: ReadonlyArray<{ prefix: string; public: number; private: number }> = [
  { prefix: 'xpub', public: 0x0488b21e, private: 0x0488ade4 }, // BIP32 mainnet
  { prefix: 'tpub', public: 0x043587cf, private: 0x04358394 }, // BIP32 testnet
  { prefix: 'zpub', public: 0x04b24746, private: 0x04b2430c }, // BIP84 mainnet
  { prefix: 'vpub', public: 0x045f1cf6, private: 0x045f18bc }, // BIP84 testnet
  { prefix: 'Ltub', public: 0x019da462, private: 0x019d9cfe }, // Litecoin mainnet
  { prefix: 'ttub', public: 0x0436f6e1, private: 0x0436ef7d }, // Litecoin testnet
];
const ACCEPTED_KEY_PREFIXES = EXTENDED_KEY_VERSIONS.map((v) => v.prefix).join(', ');

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
    const chain = cryptoCurrency(currency).chain;
    this.compressedKeys = chain === 'bitcoin' || chain === 'litecoin';
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
  const chain = cryptoCurrency(currency).chain;
  switch (chain) {
    case 'bitcoin':
    case 'litecoin':
      return p2wpkhAddress(publicKey, BECH32_HRP[chain][network]);
    case 'ethereum':
      return eip55Address(publicKey);
    case 'tron':
      return tronAddress(publicKey);
  }
}

/** Native segwit v0 P2WPKH: bech32(hrp, [0, ...words(hash160(pubkey))]), of a compressed key. */
export function p2wpkhAddress(compressedPublicKey: Uint8Array, hrp: string): string {
  if (compressedPublicKey.length !== 33) throw new RangeError('P2WPKH needs a compressed (33-byte) public key');
  const keyHash = hash('ripemd160', hash('sha256', compressedPublicKey, 'buffer'), 'buffer');
  return bech32.encode(hrp, [0, ...bech32.toWords(keyHash)]);
}

/** EIP-55 checksummed Ethereum address of a public key (compressed or not). */
export function eip55Address(publicKey: Uint8Array): string {
  return toEip55(bytesToHex(ethereumKeyHash(publicKey)));
}

/** Tron address of a public key (compressed or not): base58check(0x41 ‖ keccak256(uncompressed key)[12..32]). */
export function tronAddress(publicKey: Uint8Array): string {
  return base58check.encode(Uint8Array.of(TRON_ADDRESS_PREFIX, ...ethereumKeyHash(publicKey)));
}

/**
 * The EIP-55 form of a 40-hex-digit address (with or without 0x, any case): hex letter i is upper
 * case when nibble i of keccak256(lower-case hex) is ≥ 8.
 */
export function toEip55(hexAddress: string): string {
  const lower = hexAddress.replace(/^0x/i, '').toLowerCase();
  if (!/^[0-9a-f]{40}$/.test(lower)) throw new RangeError('an Ethereum address is 40 hex digits');
  const digest = keccak_256(Buffer.from(lower, 'latin1'));
  let out = '0x';
  for (let i = 0; i < lower.length; i++) {
    const byte = digest[i >> 1] ?? 0;
    const nibble = i % 2 === 0 ? byte >> 4 : byte & 0x0f;
    const char = lower.charAt(i);
    out += nibble >= 8 ? char.toUpperCase() : char;
  }
  return out;
}

/** Validates an address for a coin and network, answering its canonical form or a reason. */
export function validateAddress(currency: CryptoCode, network: Network, address: unknown): Parsed<string> {
  const chain: Chain = cryptoCurrency(currency).chain;
  switch (chain) {
    case 'bitcoin':
    case 'litecoin':
      return validateP2wpkhAddress(address, BECH32_HRP[chain][network]);
    case 'ethereum':
      return validateEip55Address(address);
    case 'tron':
      return validateTronAddress(address);
  }
}

/**
 * A native segwit v0 P2WPKH address for `hrp`: valid bech32 (not bech32m) checksum, that hrp,
 * witness version 0, 20-byte program. Answers the lower-case form (BIP173 allows all upper case).
 */
export function validateP2wpkhAddress(address: unknown, hrp: string): Parsed<string> {
  if (typeof address !== 'string' || address.length === 0 || address.length > 90) return refused('must be a bech32 address');
  const decoded = bech32.decodeUnsafe(address);
  if (!decoded) return refused('is not a valid bech32 address (bad characters, mixed case or checksum)');
  if (decoded.prefix !== hrp) return refused(`must start with "${hrp}1" on this network`);
  const [witnessVersion, ...programWords] = decoded.words;
  if (witnessVersion !== 0) return refused('must be a segwit version 0 address');
  const program = bech32.fromWordsUnsafe(programWords);
  if (!program || program.length !== 20) return refused('must be a P2WPKH address (20-byte witness program)');
  return ok(address.toLowerCase());
}

/**
 * An Ethereum address with a valid EIP-55 checksum: "0x" + 40 hex digits whose case matches the
 * checksum exactly. With `requireChecksum: false`, all-lower or all-upper case (no checksum to check)
 * is accepted too. Answers the checksummed form.
 */
export function validateEip55Address(address: unknown, options: { requireChecksum?: boolean } = {}): Parsed<string> {
  if (typeof address !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(address)) return refused('must be "0x" followed by 40 hex digits');
  const checksummed = toEip55(address);
  if (address === checksummed) return ok(checksummed);
  const hex = address.slice(2);
  const singleCase = hex === hex.toLowerCase() || hex === hex.toUpperCase();
  if (options.requireChecksum === false && singleCase) return ok(checksummed);
  return refused(singleCase ? 'must carry its EIP-55 checksum (mixed case)' : 'has an invalid EIP-55 checksum');
}

/**
 * The base58check spelling of a Tron address the full-node HTTP API gives in hex ("41" + 20 bytes,
 * its default without `visible: true`); undefined for anything else.
 */
export function tronAddressFromHex(hex: string): string | undefined {
  if (!/^41[0-9a-fA-F]{40}$/.test(hex)) return undefined;
  return base58check.encode(Uint8Array.from(Buffer.from(hex, 'hex')));
}

/** A Tron address: base58check with a valid checksum of 21 bytes starting 0x41 ("T…"). */
export function validateTronAddress(address: unknown): Parsed<string> {
  if (typeof address !== 'string' || address.length === 0 || address.length > 64) return refused('must be a Tron base58 address');
  let payload: Uint8Array;
  try {
    payload = base58check.decode(address);
  } catch {
    return refused('is not a valid base58check address (bad characters or checksum)');
  }
  if (payload.length !== 21 || payload[0] !== TRON_ADDRESS_PREFIX) return refused('is not a Tron address (21 bytes starting 0x41)');
  return ok(address);
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

/** keccak256 of the 64-byte uncompressed public key (without the 0x04 tag), last 20 bytes. */
function ethereumKeyHash(publicKey: Uint8Array): Uint8Array {
  const uncompressed = publicKey.length === 65 ? publicKey : secp256k1Points.uncompress(publicKey);
  return keccak_256(uncompressed.subarray(1)).subarray(12);
}

function bytesToHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}
