/**
 * Address derivation against published vectors (BIP32, BIP84, EIP-55, well-known wallet vectors
 * for ETH/TRX), and derived addresses re-checked with independent decoders.
 */
import { pbkdf2Sync } from 'node:crypto';
import { HDKey } from '@scure/bip32';
import { AddressDeriver, createAddressDeriver, generateDevelopmentKeyPair, PublicChildDeriver, parseExtendedPublicKey, validateAddress } from '../src/addresses';
import { toEip55, validateEip55Address } from '../src/evm/address';
import { validateTronAddress } from '../src/tron/address';
import { p2wpkhAddress, validateP2wpkhAddress } from '../src/utxo/address';
import { secp256k1Backends } from '../src/secp256k1';
import { CRYPTO_CODES, type CryptoCode } from '../src/coin';
import { cryptoCurrency } from '../src/currencies';
import type { Network } from '@coinvoice/domain/project-network';
import {
  base58CheckDecode,
  base58CheckEncode,
  decodeSegwitV0,
  eip55,
  ethereumKeyHash,
  hash160,
} from '../../invoice/test/support/independent-codecs';

const hex = (s: string) => Uint8Array.from(Buffer.from(s, 'hex'));

/** Unwraps a Parsed value, failing the test with the reason. */
function value<T>(parsed: { ok: true; value: T } | { ok: false; reason: string }): T {
  if (!parsed.ok) throw new Error(`unexpectedly refused: ${parsed.reason}`);
  return parsed.value;
}

describe('BIP32 test vector 1 (seed 000102030405060708090a0b0c0d0e0f)', () => {
  // https://github.com/bitcoin/bips/blob/master/bip-0032.mediawiki#test-vector-1
  const vectors: Array<[string, string]> = [
    ['m', 'xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8'],
    ["m/0'", 'xpub68Gmy5EdvgibQVfPdqkBBCHxA5htiqg55crXYuXoQRKfDBFA1WEjWgP6LHhwBZeNK1VTsfTFUHCdrfp1bgwQ9xv5ski8PX9rL2dZXvgGDnw'],
    ["m/0'/1", 'xpub6ASuArnXKPbfEwhqN6e3mwBcDTgzisQN1wXN9BJcM47sSikHjJf3UFHKkNAWbWMiGj7Wf5uMash7SyYq527Hqck2AxYysAA7xmALppuCkwQ'],
    ["m/0'/1/2'", 'xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFGTsxxpG5uJh7n7epu4trkrX7x7DogT5Uv6fcLW5'],
    ["m/0'/1/2'/2", 'xpub6FHa3pjLCk84BayeJxFW2SP4XRrFd1JYnxeLeU8EqN3vDfZmbqBqaGJAyiLjTAwm6ZLRQUMv1ZACTj37sR62cfN7fe5JnJ7dh8zL4fiyLHV'],
    ["m/0'/1/2'/2/1000000000", 'xpub6H1LXWLaKsWFhvm6RVpEL9P4KfRZSW7abD2ttkWP3SSQvnyA8FSVqNTEcYFgJS2UaFcxupHiYkro49S8yGasTvXEYBVPamhGW6cFJodrTHy'],
  ];
  const master = HDKey.fromMasterSeed(hex('000102030405060708090a0b0c0d0e0f'));

  it.each(vectors)('derives %s from the seed', (path, xpub) => {
    expect(master.derive(path).publicExtendedKey).toBe(xpub);
  });

  it('derives the non-hardened children from a parsed xpub alone (what the service does)', () => {
    const account = value(parseExtendedPublicKey(vectors[3]![1]));
    expect(account.privateKey).toBeNull();
    const child = account.deriveChild(2);
    expect(child.publicExtendedKey).toBe(vectors[4]![1]);
    expect(child.deriveChild(1_000_000_000).publicExtendedKey).toBe(vectors[5]![1]);
  });

  it('derives the same non-hardened child public keys with the fast deriver (libsecp256k1 + node SHA-512)', () => {
    const [parent, child, grandchild] = [3, 4, 5].map((i) => value(parseExtendedPublicKey(vectors[i]![1])));
    expect(Buffer.from(new PublicChildDeriver(parent!).childPublicKey(2)).toString('hex')).toBe(Buffer.from(child!.publicKey!).toString('hex'));
    expect(Buffer.from(new PublicChildDeriver(child!).childPublicKey(1_000_000_000)).toString('hex')).toBe(
      Buffer.from(grandchild!.publicKey!).toString('hex'),
    );
  });
});

// BIP39 "abandon … about" with no passphrase: the seed every wallet vector below starts from.
const MNEMONIC = 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about';
const SEED = pbkdf2Sync(MNEMONIC.normalize('NFKD'), 'mnemonic', 2048, 64, 'sha512');
const ZPUB_VERSIONS = { public: 0x04b24746, private: 0x04b2430c };

describe('BIP84 test vectors (abandon … about)', () => {
  // https://github.com/bitcoin/bips/blob/master/bip-0084.mediawiki#test-vectors
  const ACCOUNT_ZPUB = 'zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs';

  it('starts from the published BIP39 seed', () => {
    expect(SEED.toString('hex')).toBe(
      '5eb00bbddcf069084889a8ab9155568165f5c453ccb85e70811aaed6f6da5fc19a5ac40b389cd370d086206dec8aa6c43daea6690f20ad3d8d48b2d2ce9e38e4',
    );
  });

  it("has the published account zpub at m/84'/0'/0'", () => {
    expect(HDKey.fromMasterSeed(SEED, ZPUB_VERSIONS).derive("m/84'/0'/0'").publicExtendedKey).toBe(ACCOUNT_ZPUB);
  });

  it('derives the published receive addresses from the zpub', () => {
    const deriver = value(createAddressDeriver(ACCOUNT_ZPUB, 'BTC', 'mainnet'));
    expect(deriver.addressAt(0)).toBe('bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu');
    expect(deriver.addressAt(1)).toBe('bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g');
  });

  it('derives the published first change address', () => {
    const account = value(parseExtendedPublicKey(ACCOUNT_ZPUB));
    expect(p2wpkhAddress(account.deriveChild(1).deriveChild(0).publicKey!, 'bc')).toBe('bc1q8c6fshw2dlwun7ekn9qwf37cu2rn755upcp6el');
  });

  it('gives the same addresses for the xpub serialization of the same key', () => {
    const payload = base58CheckDecode(ACCOUNT_ZPUB)!;
    const asXpub = base58CheckEncode(Buffer.concat([Buffer.from('0488b21e', 'hex'), payload.subarray(4)]));
    expect(asXpub.startsWith('xpub')).toBe(true);
    expect(value(createAddressDeriver(asXpub, 'BTC', 'mainnet')).addressAt(0)).toBe('bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu');
  });
});

describe('well-known abandon … about vectors of the other coins (as Trust Wallet Core lists them)', () => {
  const account = (path: string) => HDKey.fromMasterSeed(SEED).derive(path).publicExtendedKey;

  it("LTC m/84'/2'/0'/0/0 and 0/1", () => {
    const deriver = value(createAddressDeriver(account("m/84'/2'/0'"), 'LTC', 'mainnet'));
    expect(deriver.addressAt(0)).toBe('ltc1qjmxnz78nmc8nq77wuxh25n2es7rzm5c2rkk4wh');
    expect(deriver.addressAt(1)).toBe('ltc1qwlezpr3890hcp6vva9twqh27mr6edadreqvhnn');
  });

  it("ETH m/44'/60'/0'/0/0 is 0x9858EfFD232B4033E47d90003D41EC34EcaEda94", () => {
    const deriver = value(createAddressDeriver(account("m/44'/60'/0'"), 'ETH', 'mainnet'));
    expect(deriver.addressAt(0)).toBe('0x9858EfFD232B4033E47d90003D41EC34EcaEda94');
  });

  it('USDT and USDC use the Ethereum address of the same key', () => {
    const xpub = account("m/44'/60'/0'");
    for (const code of ['USDT', 'USDC'] as const) {
      expect(value(createAddressDeriver(xpub, code, 'mainnet')).addressAt(0)).toBe('0x9858EfFD232B4033E47d90003D41EC34EcaEda94');
    }
  });

  it("TRX m/44'/195'/0'/0/0 is TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH", () => {
    const deriver = value(createAddressDeriver(account("m/44'/195'/0'"), 'TRX', 'mainnet'));
    expect(deriver.addressAt(0)).toBe('TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH');
  });

  it('testnet Tron addresses have the mainnet format', () => {
    const xpub = account("m/44'/195'/0'");
    expect(value(createAddressDeriver(xpub, 'TRX', 'testnet')).addressAt(0)).toBe('TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH');
  });
});

describe('EIP-55 test vectors', () => {
  // https://eips.ethereum.org/EIPS/eip-55#test-cases
  const vectors = [
    '0x52908400098527886E0F7030069857D2E4169EE7',
    '0x8617E340B3D01FA5F11F306F4090FD50E238070D',
    '0xde709f2102306220921060314715629080e2fb77',
    '0x27b1fdb04752bbc536007a920d24acb045561c26',
    '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
    '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
    '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB',
    '0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb',
  ];

  it.each(vectors)('%s checksums and validates', (address) => {
    expect(toEip55(address.toLowerCase())).toBe(address);
    expect(eip55(address.slice(2).toLowerCase())).toBe(address); // the independent rule agrees
    expect(validateEip55Address(address)).toEqual({ ok: true, value: address });
  });

  it('refuses one flipped letter', () => {
    const address = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
    const flipped = `${address.slice(0, 4)}a${address.slice(5)}`; // 0x5aAeb… -> 0x5aaeb…
    expect(validateEip55Address(flipped)).toEqual({ ok: false, reason: 'has an invalid EIP-55 checksum' });
  });

  it('refuses an unchecksummed address unless asked not to require the checksum', () => {
    const lower = '0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed';
    expect(validateEip55Address(lower).ok).toBe(false);
    expect(validateEip55Address(lower, { requireChecksum: false })).toEqual({ ok: true, value: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed' });
  });

  it.each(['', '0x', '5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe', '0xZZAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', 42])(
    'refuses malformed %p',
    (address) => {
      expect(validateEip55Address(address).ok).toBe(false);
    },
  );
});

describe('Tron base58check vectors', () => {
  // TRC-20 USDT contract and other mainnet addresses with their hex forms, as TronScan shows them.
  const vectors: Array<[string, string]> = [
    ['TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', '41a614f803b6fd780986a42c78ec9c7f77e6ded13c'],
    ['TLrPF5aTqtqLxFo1Y69jpQvZ2T4ydkX9pC', '41775f057150b85086f456aac88fd52ba8e35db282'],
    ['THPvaUhoh2Qn2y9THCZML3H815hhFhn5YC', '41517591d35d313bf6a5e33098284502b045e2bc08'],
  ];

  it.each(vectors)('%s is hex %s', (base58, hexAddress) => {
    expect(base58CheckDecode(base58)?.toString('hex')).toBe(hexAddress);
    expect(base58CheckEncode(Buffer.from(hexAddress, 'hex'))).toBe(base58);
    expect(validateTronAddress(base58)).toEqual({ ok: true, value: base58 });
  });

  it('refuses a changed character, a non-Tron base58check address and garbage', () => {
    expect(validateTronAddress('TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u').ok).toBe(false);
    expect(validateTronAddress('1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa')).toEqual({
      ok: false,
      reason: 'is not a Tron address (21 bytes starting 0x41)',
    });
    expect(validateTronAddress('T0OIl').ok).toBe(false);
    expect(validateTronAddress(undefined).ok).toBe(false);
  });
});

describe('P2WPKH validation', () => {
  it('accepts the BIP173 P2WPKH examples, upper case normalized to lower', () => {
    expect(validateP2wpkhAddress('BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4', 'bc')).toEqual({
      ok: true,
      value: 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4',
    });
    expect(validateP2wpkhAddress('tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', 'tb').ok).toBe(true);
  });

  it.each([
    ['bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4', 'tb', 'must start with "tb1" on this network'],
    ['bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5', 'bc', 'is not a valid bech32 address (bad characters, mixed case or checksum)'],
    ['bc1Qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4', 'bc', 'is not a valid bech32 address (bad characters, mixed case or checksum)'],
    // BIP173 P2WSH: right version, 32-byte program.
    ['bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3', 'bc', 'must be a P2WPKH address (20-byte witness program)'],
    // BIP86 taproot (bech32m): not a bech32 checksum.
    ['bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr', 'bc', 'is not a valid bech32 address (bad characters, mixed case or checksum)'],
    ['1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa', 'bc', 'is not a valid bech32 address (bad characters, mixed case or checksum)'],
  ])('refuses %s for hrp %s', (address, hrp, reason) => {
    expect(validateP2wpkhAddress(address, hrp)).toEqual({ ok: false, reason });
  });

  it('routes by coin and network', () => {
    expect(validateAddress('LTC', 'mainnet', 'bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu').ok).toBe(false);
    expect(validateAddress('BTC', 'mainnet', 'bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu').ok).toBe(true);
    expect(validateAddress('USDC', 'testnet', '0x9858EfFD232B4033E47d90003D41EC34EcaEda94').ok).toBe(true);
    expect(validateAddress('TRX', 'testnet', 'TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH').ok).toBe(true);
  });
});

describe('extended key parsing', () => {
  it('refuses private keys, garbage and broken checksums, with reasons', () => {
    const xprv = 'xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi';
    expect(parseExtendedPublicKey(xprv)).toEqual({ ok: false, reason: 'is an extended PRIVATE key; configure only the extended public key' });
    expect(parseExtendedPublicKey('not a key').ok).toBe(false);
    expect(parseExtendedPublicKey(123).ok).toBe(false);
    const xpub = 'xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet9';
    expect(parseExtendedPublicKey(xpub)).toEqual({ ok: false, reason: 'is not a valid base58check extended key' });
  });

  it('refuses an unknown version (a BIP49 ypub)', () => {
    const payload = base58CheckDecode('xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8')!;
    const ypub = base58CheckEncode(Buffer.concat([Buffer.from('049d7cb2', 'hex'), payload.subarray(4)]));
    const parsed = parseExtendedPublicKey(ypub);
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.reason).toMatch(/^has an unknown version; accepted: xpub, tpub, zpub, vpub, Ltub, ttub$/);
  });

  it('refuses indexes outside the non-hardened range', () => {
    const deriver = value(createAddressDeriver(generateDevelopmentKeyPair('BTC', 'mainnet').xpub, 'BTC', 'mainnet'));
    for (const index of [-1, 2 ** 31, 1.5, Number.NaN]) expect(() => deriver.addressAt(index)).toThrow(RangeError);
    expect(() => deriver.addressAt(2 ** 31 - 1)).not.toThrow();
  });
});

describe('development key pairs', () => {
  const fixedSeed = hex('000102030405060708090a0b0c0d0e0f');

  it.each([
    ['BTC', 'mainnet', "m/84'/0'/0'", 'xpub', 'xprv'],
    ['BTC', 'testnet', "m/84'/1'/0'", 'tpub', 'tprv'],
    ['LTC', 'mainnet', "m/84'/2'/0'", 'xpub', 'xprv'],
    ['ETH', 'mainnet', "m/44'/60'/0'", 'xpub', 'xprv'],
    ['USDT', 'testnet', "m/44'/1'/0'", 'tpub', 'tprv'],
    ['TRX', 'mainnet', "m/44'/195'/0'", 'xpub', 'xprv'],
  ] as const)('%s %s: account %s, %s/%s', (currency, network, path, pubPrefix, prvPrefix) => {
    const pair = generateDevelopmentKeyPair(currency, network, fixedSeed);
    expect(pair.path).toBe(path);
    expect(pair.xpub.startsWith(pubPrefix)).toBe(true);
    expect(pair.xprv.startsWith(prvPrefix)).toBe(true);
    // The xpub is the public half of the xprv, and is exactly what the seed gives at that path.
    const versions = network === 'testnet' ? { public: 0x043587cf, private: 0x04358394 } : undefined;
    expect(HDKey.fromExtendedKey(pair.xprv, versions).publicExtendedKey).toBe(pair.xpub);
    expect(HDKey.fromMasterSeed(fixedSeed, versions).derive(path).publicExtendedKey).toBe(pair.xpub);
    expect(value(createAddressDeriver(pair.xpub, currency, network)).addressAt(0)).toEqual(expect.any(String));
  });

  it('draws a fresh random seed by default', () => {
    expect(generateDevelopmentKeyPair('BTC', 'mainnet').xpub).not.toBe(generateDevelopmentKeyPair('BTC', 'mainnet').xpub);
  });
});

/**
 * Every coin and network: derived addresses decode with the independent codecs and encode exactly
 * the public key the index derives to, are stable, and are distinct across indexes.
 */
describe.each(CRYPTO_CODES.flatMap((code) => (['mainnet', 'testnet'] as const).map((network) => [code, network] as const)))(
  'derived %s %s addresses',
  (currency: CryptoCode, network: Network) => {
    const pair = generateDevelopmentKeyPair(currency, network);
    const deriver: AddressDeriver = value(createAddressDeriver(pair.xpub, currency, network));
    const account = value(parseExtendedPublicKey(pair.xpub));
    const indexes = [0, 1, 2, 19, 20, 1000, 65_535, 2 ** 31 - 1];

    it('encode the derived key, checked by an independent decoder', () => {
      for (const index of indexes) {
        const address = deriver.addressAt(index);
        const publicKey = account.deriveChild(0).deriveChild(index).publicKey!;
        independentlyCheck(currency, network, address, publicKey);
        expect(validateAddress(currency, network, address)).toEqual({ ok: true, value: address });
      }
    });

    it('are the same for the same key and index, and distinct across 1,000 indexes', () => {
      const again = value(createAddressDeriver(pair.xpub, currency, network));
      expect(again.addressAt(7)).toBe(deriver.addressAt(7));
      const addresses = new Set(Array.from({ length: 1000 }, (_, i) => deriver.addressAt(i)));
      expect(addresses.size).toBe(1000);
    });
  },
);

function independentlyCheck(currency: CryptoCode, network: Network, address: string, publicKey: Uint8Array): void {
  // By address format, not by coin code: POL and BNB addresses are EVM addresses (eip55).
  const { chain, addressFormat } = cryptoCurrency(currency);
  if (addressFormat === 'p2wpkh') {
    if (chain !== 'bitcoin' && chain !== 'litecoin') throw new Error(`no segwit prefixes known for ${chain}`);
    const hrp = { bitcoin: { mainnet: 'bc', testnet: 'tb' }, litecoin: { mainnet: 'ltc', testnet: 'tltc' } }[chain][network];
    const decoded = decodeSegwitV0(address);
    expect(decoded).not.toBeNull();
    expect(decoded!.hrp).toBe(hrp);
    expect(decoded!.version).toBe(0);
    expect(decoded!.program.toString('hex')).toBe(hash160(publicKey).toString('hex'));
  } else if (addressFormat === 'eip55') {
    const keyHash = ethereumKeyHash(publicKey).toString('hex');
    expect(address).toBe(eip55(keyHash));
  } else {
    expect(addressFormat).toBe('tron-base58check');
    const payload = base58CheckDecode(address);
    expect(payload?.toString('hex')).toBe(`41${ethereumKeyHash(publicKey).toString('hex')}`);
  }
}

describe('secp256k1 backends', () => {
  it('libsecp256k1 and the @noble/curves fallback compute the same points', () => {
    expect(secp256k1Backends.map((b) => b.backend)).toEqual(['libsecp256k1', 'noble']);
    const [native, fallback] = secp256k1Backends;
    const parent = value(parseExtendedPublicKey(generateDevelopmentKeyPair('BTC', 'mainnet').xpub)).publicKey!;
    for (let i = 1; i <= 20; i++) {
      const tweak = Uint8Array.from(Buffer.from(i.toString(16).padStart(2, '0').repeat(32), 'hex'));
      const child = native!.tweakAdd(parent, tweak);
      expect(Buffer.from(fallback!.tweakAdd(parent, tweak)).toString('hex')).toBe(Buffer.from(child).toString('hex'));
      expect(Buffer.from(fallback!.uncompress(child)).toString('hex')).toBe(Buffer.from(native!.uncompress(child)).toString('hex'));
    }
    // A tweak ≥ the group order is refused by both.
    const tooLarge = Uint8Array.from(Buffer.alloc(32, 0xff));
    for (const backend of secp256k1Backends) expect(() => backend.tweakAdd(parent, tooLarge)).toThrow();
  });
});
