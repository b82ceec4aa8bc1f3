/**
 * Merchant session tokens: JWTs signed with Ed25519 (`alg: "EdDSA"`, RFC 8037), signed and
 * verified by `jose` (the JWS encoding, the signature, the time and issuer/audience checks); the
 * keys are node:crypto KeyObjects. Auth holds the private keys (`SigningKeys`); the gateway
 * verifies tokens locally against the public JWKS (`importJwks` + `verifyJwt`).
 *
 * The tokens are byte for byte those of the hand-written signer this replaced (header
 * {alg, typ, kid}, the same claims in the same order; Ed25519 signatures are deterministic), so
 * sessions issued before the change stay valid until they expire.
 *
 * Rotation: `SigningKeys.rotate()` makes a new key current and keeps the old ones for verification,
 * so tokens signed before the rotation stay valid until they expire, as long as the published JWKS
 * still lists their key. Drop a retired key (`withoutKey`) once its last token has expired.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { decodeProtectedHeader, errors as joseErrors, jwtVerify, SignJWT, type JWTPayload } from 'jose';

export const JWT_ISSUER = 'coinvoice';
export const JWT_AUDIENCE = 'coinvoice-dashboard';
export const JWT_ALGORITHM = 'EdDSA';
/** Tolerated clock difference between the issuer and the verifier. */
export const DEFAULT_CLOCK_SKEW_SECONDS = 30;
/** Session tokens are small; anything longer is refused before parsing. */
const MAX_TOKEN_LENGTH = 8192;
/**
 * An Ed25519 signature in canonical base64url: 64 bytes are 86 characters whose last one carries
 * 2 zero bits. Checked before jose, whose decoder would accept other spellings of the same bytes.
 */
const ED25519_SIGNATURE = /^[A-Za-z0-9_-]{85}[AQgw]$/;

/** Claims of a session token as signed. `admin` is only present (true) for operators. */
export interface SessionClaims {
  /** Merchant id. */
  sub: string;
  email: string;
  admin?: boolean;
  /** Session epoch of the merchant when issued: revoked once the merchant's epoch is higher. */
  sv: number;
  /** Issued at, unix seconds. */
  iat: number;
  /** Expires at, unix seconds. */
  exp: number;
  iss: typeof JWT_ISSUER;
  aud: typeof JWT_AUDIENCE;
}

/** Who a session token is issued to. */
export interface SessionSubject {
  merchantId: string;
  email: string;
  admin: boolean;
  /** The merchant's current session epoch (raised by logout, password change, operator changes). */
  sessionEpoch: number;
}

export interface IssuedSessionToken {
  token: string;
  expiresAt: Date;
  claims: SessionClaims;
}

export interface SigningKey {
  /** RFC 7638 JWK thumbprint of the public key: stable, derived from the key itself. */
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

/** A public key as published in the JWKS (RFC 8037 OKP key). */
export interface Ed25519Jwk {
  kty: 'OKP';
  crv: 'Ed25519';
  /** Public key, base64url without padding. */
  x: string;
  kid: string;
  alg: typeof JWT_ALGORITHM;
  use: 'sig';
}

export interface Jwks {
  keys: Ed25519Jwk[];
}

/** Public keys by kid, ready for `verifyJwt`. */
export type VerificationKeys = ReadonlyMap<string, KeyObject>;

export type JwtRejection =
  /** Not three base64url segments of JSON objects, or a claim of the wrong type. */
  | 'malformed'
  /** `alg` other than EdDSA (including `none` and HMAC), or a `crit` header. */
  | 'unsupported_algorithm'
  /** No `kid`, or one not in the key set. */
  | 'unknown_key'
  | 'bad_signature'
  | 'expired'
  /** `iat` (or `nbf`) lies in the future beyond the allowed skew. */
  | 'not_yet_valid'
  | 'wrong_issuer'
  | 'wrong_audience';

export type VerifiedJwt = { valid: true; claims: SessionClaims } | { valid: false; reason: JwtRejection };

// ---------------------------------------------------------------------------------------------
// Signing keys (auth service side)

export function generateSigningKey(): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { kid: thumbprintOf(publicKey), privateKey, publicKey };
}

/** PKCS#8 PEM of the private key, for the auth service's database. */
export function signingKeyToPem(key: SigningKey): string {
  return key.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}

/** The signing key stored as PKCS#8 PEM; the public key and kid are derived from it. */
export function signingKeyFromPem(pem: string): SigningKey {
  const privateKey = createPrivateKey({ key: pem, format: 'pem' });
  if (privateKey.asymmetricKeyType !== 'ed25519') throw new Error('signing key is not an Ed25519 private key');
  const publicKey = createPublicKey(privateKey);
  return { kid: thumbprintOf(publicKey), privateKey, publicKey };
}

export function publicJwkOf(key: SigningKey): Ed25519Jwk {
  return { kty: 'OKP', crv: 'Ed25519', x: rawPublicKeyOf(key.publicKey), kid: key.kid, alg: JWT_ALGORITHM, use: 'sig' };
}

/** The current signing key plus retired keys whose tokens may still be live. Immutable. */
export class SigningKeys {
  constructor(
    readonly current: SigningKey,
    readonly retired: readonly SigningKey[] = [],
  ) {}

  static generate(): SigningKeys {
    return new SigningKeys(generateSigningKey());
  }

  /** A key set with `next` as the current key and the present current key retired (newest first). */
  rotate(next: SigningKey = generateSigningKey()): SigningKeys {
    return new SigningKeys(next, [this.current, ...this.retired]);
  }

  /** Drops a retired key (after its last token expired); the current key cannot be dropped. */
  withoutKey(kid: string): SigningKeys {
    if (kid === this.current.kid) throw new Error('the current signing key cannot be removed');
    return new SigningKeys(
      this.current,
      this.retired.filter((key) => key.kid !== kid),
    );
  }

  /** Public keys for the gateway, current key first. */
  toJwks(): Jwks {
    return { keys: [this.current, ...this.retired].map(publicJwkOf) };
  }

  sign(subject: SessionSubject, options: { now: Date; ttlSeconds: number }): Promise<IssuedSessionToken> {
    return signSessionToken(this.current, subject, options);
  }
}

export async function signSessionToken(
  key: SigningKey,
  subject: SessionSubject,
  options: { now: Date; ttlSeconds: number },
): Promise<IssuedSessionToken> {
  if (!Number.isInteger(options.ttlSeconds) || options.ttlSeconds <= 0) throw new RangeError('ttlSeconds must be a positive integer');
  const iat = Math.floor(options.now.getTime() / 1000);
  const claims: SessionClaims = {
    sub: subject.merchantId,
    email: subject.email,
    ...(subject.admin ? { admin: true } : {}),
    sv: subject.sessionEpoch,
    iat,
    exp: iat + options.ttlSeconds,
    iss: JWT_ISSUER,
    aud: JWT_AUDIENCE,
  };
  // The claims as they are, in this order (no setIssuedAt/setExpirationTime, which would add or
  // reorder them): the payload stays what verifiers have always been given.
  const token = await new SignJWT({ ...claims } satisfies JWTPayload).setProtectedHeader({ alg: JWT_ALGORITHM, typ: 'JWT', kid: key.kid }).sign(key.privateKey);
  return { token, expiresAt: new Date(claims.exp * 1000), claims };
}

// ---------------------------------------------------------------------------------------------
// Verification (gateway side)

/**
 * Usable keys of a JWKS document (e.g. fetched from auth). Throws when the document is not a JWKS;
 * skips entries that are not Ed25519 signature keys, as RFC 7517 §5 asks of unknown keys.
 */
export function importJwks(document: unknown): VerificationKeys {
  if (!isRecord(document) || !Array.isArray(document.keys)) throw new Error('not a JWKS: expected {keys: [...]}');
  const keys = new Map<string, KeyObject>();
  for (const jwk of document.keys) {
    if (!isRecord(jwk)) continue;
    const { kty, crv, x, kid, alg, use } = jwk;
    if (kty !== 'OKP' || crv !== 'Ed25519' || typeof kid !== 'string' || kid === '') continue;
    if (alg !== undefined && alg !== JWT_ALGORITHM) continue;
    if (use !== undefined && use !== 'sig') continue;
    if (typeof x !== 'string' || decodeBase64Url(x)?.length !== 32) continue;
    keys.set(kid, createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' }));
  }
  return keys;
}

/**
 * Checks a session token's structure, algorithm, signature, time window, issuer and audience.
 * Our rules first (only EdDSA, no `crit`, a `kid` we hold, a canonical signature), then jose's
 * verification, then the shape of our claims.
 */
export async function verifyJwt(
  token: unknown,
  keys: VerificationKeys,
  now: Date,
  clockSkewSeconds: number = DEFAULT_CLOCK_SKEW_SECONDS,
): Promise<VerifiedJwt> {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH) return refused('malformed');
  const segments = token.split('.');
  if (segments.length !== 3) return refused('malformed');
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    return refused('malformed');
  }
  // Only EdDSA: never `none`, never HMAC (which would let a public key act as a shared secret).
  if (header.alg !== JWT_ALGORITHM || header.crit !== undefined) return refused('unsupported_algorithm');
  if (header.typ !== undefined && header.typ !== 'JWT') return refused('malformed');
  const publicKey = typeof header.kid === 'string' ? keys.get(header.kid) : undefined;
  if (!publicKey) return refused('unknown_key');
  if (!ED25519_SIGNATURE.test(segments[2] ?? '')) return refused('malformed');

  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, publicKey, {
      algorithms: [JWT_ALGORITHM],
      issuer: JWT_ISSUER,
      audience: JWT_AUDIENCE,
      clockTolerance: clockSkewSeconds,
      currentDate: now,
    }));
  } catch (error) {
    return refused(rejectionOf(error));
  }

  // From here on the payload is authentic (signed by our key); still check its shape.
  const { sub, email, admin, sv, iat, exp, nbf } = payload as Record<string, unknown>;
  if (
    typeof sub !== 'string' ||
    sub === '' ||
    typeof email !== 'string' ||
    (admin !== undefined && typeof admin !== 'boolean') ||
    typeof sv !== 'number' ||
    !Number.isSafeInteger(sv) ||
    sv < 0 ||
    !isUnixTime(iat) ||
    !isUnixTime(exp) ||
    (nbf !== undefined && !isUnixTime(nbf))
  ) {
    return refused('malformed');
  }
  // jose checks `iat` only against a maximum age; a token issued in the future is refused here.
  if (iat > now.getTime() / 1000 + clockSkewSeconds) return refused('not_yet_valid');
  return {
    valid: true,
    claims: { sub, email, ...(admin === true ? { admin } : {}), sv, iat, exp, iss: JWT_ISSUER, aud: JWT_AUDIENCE },
  };
}

/** jose's verdict in our words. */
function rejectionOf(error: unknown): JwtRejection {
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'bad_signature';
  if (error instanceof joseErrors.JWTExpired) return 'expired';
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return 'unsupported_algorithm';
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    if (error.claim === 'iss') return 'wrong_issuer';
    if (error.claim === 'aud') return 'wrong_audience';
    if ((error.claim === 'nbf' || error.claim === 'iat') && error.reason === 'check_failed') return 'not_yet_valid';
  }
  if (error instanceof joseErrors.JOSEError) return 'malformed';
  throw error;
}

function refused(reason: JwtRejection): VerifiedJwt {
  return { valid: false, reason };
}

// ---------------------------------------------------------------------------------------------
// Encoding helpers

/**
 * Strict base64url: only the URL-safe alphabet, no padding, and canonical (re-encodes to the same
 * text), because Buffer.from(…, 'base64url') silently skips invalid characters.
 */
function decodeBase64Url(text: string): Buffer | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isUnixTime(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function rawPublicKeyOf(publicKey: KeyObject): string {
  const jwk = publicKey.export({ format: 'jwk' });
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new Error('not an Ed25519 public key');
  return jwk.x;
}

/** RFC 7638 thumbprint: SHA-256 of the required members in lexicographic order, base64url. */
function thumbprintOf(publicKey: KeyObject): string {
  const canonical = JSON.stringify({ crv: 'Ed25519', kty: 'OKP', x: rawPublicKeyOf(publicKey) });
  return createHash('sha256').update(canonical, 'utf8').digest('base64url');
}
