/**
 * The two secp256k1 point operations address derivation needs, on libsecp256k1 (the `secp256k1`
 * package's prebuilt N-API addon) when it loads, else on @noble/curves. Measured here (bench/
 * results.md, "Address derivation"): a public child key costs ~50 µs on libsecp256k1 against
 * ~700 µs on @noble/curves and ~220 µs on tiny-secp256k1's WASM build, so the native addon is
 * what brings an address under 0.15 ms. Both backends compute the same points; the fallback only
 * keeps a platform without a prebuilt addon working (slowly).
 */
import { secp256k1 as noble } from '@noble/curves/secp256k1.js';

/** What the addon's `secp256k1/bindings` entry exports (the subset used here). */
interface NativeSecp256k1 {
  publicKeyCreate(secretKey: Uint8Array, compressed: boolean): Uint8Array;
  publicKeyCombine(publicKeys: Uint8Array[], compressed: boolean): Uint8Array;
  publicKeyConvert(publicKey: Uint8Array, compressed: boolean): Uint8Array;
}

export type Secp256k1Backend = 'libsecp256k1' | 'noble';

interface PointOperations {
  readonly backend: Secp256k1Backend;
  /**
   * The point publicKey + tweak·G, compressed (33 bytes) or not (65); `publicKey` in either form.
   * Throws when tweak is 0 or ≥ n, or the sum is the point at infinity.
   */
  tweakAdd(publicKey: Uint8Array, tweak: Uint8Array, compressed?: boolean): Uint8Array;
  /** The 65-byte uncompressed form (0x04 ‖ x ‖ y) of a compressed point. */
  uncompress(compressedPublicKey: Uint8Array): Uint8Array;
}

function loadNative(): PointOperations | null {
  let native: NativeSecp256k1;
  try {
    // `secp256k1/bindings` is the addon alone; the package root would silently fall back to the
    // slow `elliptic` JS build when no prebuilt binary matches the platform.
    native = require('secp256k1/bindings') as NativeSecp256k1;
  } catch {
    return null;
  }
  return {
    backend: 'libsecp256k1',
    // tweak·G by the constant-base multiplication (precomputed tables for G), then one point
    // addition: ~15% less than libsecp256k1's tweak_add, which runs the general double
    // multiplication 1·P + t·G; with P passed uncompressed, its parse needs no square root.
    tweakAdd: (publicKey, tweak, compressed = true) => native.publicKeyCombine([publicKey, native.publicKeyCreate(tweak, false)], compressed),
    uncompress: (publicKey) => native.publicKeyConvert(publicKey, false),
  };
}

const NOBLE: PointOperations = {
  backend: 'noble',
  tweakAdd(publicKey, tweak, compressed = true) {
    const scalar = BigInt('0x' + Buffer.from(tweak).toString('hex'));
    if (scalar === 0n || scalar >= noble.Point.CURVE().n) throw new RangeError('tweak out of range');
    const sum = noble.Point.fromBytes(publicKey).add(noble.Point.BASE.multiply(scalar));
    return sum.toBytes(compressed); // toBytes refuses the point at infinity
  },
  uncompress: (publicKey) => noble.Point.fromBytes(publicKey).toBytes(false),
};

/** The point operations in use: libsecp256k1 when its addon loads, else @noble/curves. */
export const secp256k1Points: PointOperations = loadNative() ?? NOBLE;

/** Both backends, for tests that check they agree. */
export const secp256k1Backends: ReadonlyArray<PointOperations> = [loadNative(), NOBLE].filter((b): b is PointOperations => b !== null);
