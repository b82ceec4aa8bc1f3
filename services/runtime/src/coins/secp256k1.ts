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
  publicKeyTweakAdd(publicKey: Uint8Array, tweak: Uint8Array, compressed: boolean): Uint8Array;
  publicKeyConvert(publicKey: Uint8Array, compressed: boolean): Uint8Array;
}

export type Secp256k1Backend = 'libsecp256k1' | 'noble';

interface PointOperations {
  readonly backend: Secp256k1Backend;
  /** Compressed (33-byte) point publicKey + tweak·G; throws when tweak ≥ n or the sum is infinity. */
  tweakAdd(compressedPublicKey: Uint8Array, tweak: Uint8Array): Uint8Array;
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
    tweakAdd: (publicKey, tweak) => native.publicKeyTweakAdd(publicKey, tweak, true),
    uncompress: (publicKey) => native.publicKeyConvert(publicKey, false),
  };
}

const NOBLE: PointOperations = {
  backend: 'noble',
  tweakAdd(publicKey, tweak) {
    const scalar = BigInt('0x' + Buffer.from(tweak).toString('hex'));
    if (scalar === 0n || scalar >= noble.Point.CURVE().n) throw new RangeError('tweak out of range');
    const sum = noble.Point.fromBytes(publicKey).add(noble.Point.BASE.multiply(scalar));
    return sum.toBytes(true); // toBytes refuses the point at infinity
  },
  uncompress: (publicKey) => noble.Point.fromBytes(publicKey).toBytes(false),
};

/** The point operations in use: libsecp256k1 when its addon loads, else @noble/curves. */
export const secp256k1Points: PointOperations = loadNative() ?? NOBLE;

/** Both backends, for tests that check they agree. */
export const secp256k1Backends: ReadonlyArray<PointOperations> = [loadNative(), NOBLE].filter((b): b is PointOperations => b !== null);
