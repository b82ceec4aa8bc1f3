/**
 * Merchant session tokens: compact JWS (RFC 7515) signed with Ed25519 (`alg: "EdDSA"`, RFC 8037),
 * using node:crypto only. Auth holds the private keys (`SigningKeys`); the gateway verifies tokens
 * locally against the public JWKS (`importJwks` + `verifyJwt`).
 *
 * Rotation: `SigningKeys.rotate()` makes a new key current and keeps the old ones for verification,
 * so tokens signed before the rotation stay valid until they expire, as long as the published JWKS
 * still lists their key. Drop a retired key (`withoutKey`) once its last token has expired.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign as signBytes,
  verify as verifyBytes,
  type KeyObject,
} from 'node:crypto';

export const JWT_ISSUER = 'coinvoice';
export const JWT_AUDIENCE = 'coinvoice-dashboard';
export const JWT_ALGORITHM = 'EdDSA';
/** Tolerated clock difference between the issuer and the verifier. */
export const DEFAULT_CLOCK_SKEW_SECONDS = 30;
/** Session tokens are small; anything longer is refused before parsing. */
const MAX_TOKEN_LENGTH = 8192;

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

  sign(subject: SessionSubject, options: { now: Date; ttlSeconds: number }): IssuedSessionToken {
    return signSessionToken(this.current, subject, options);
  }
}

export function signSessionToken(
  key: SigningKey,
  subject: SessionSubject,
  options: { now: Date; ttlSeconds: number },
): IssuedSessionToken {
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
  const header = { alg: JWT_ALGORITHM, typ: 'JWT', kid: key.kid };
  const signingInput = `${encodeJson(header)}.${encodeJson(claims)}`;
  const signature = signBytes(null, Buffer.from(signingInput, 'ascii'), key.privateKey);
  return { token: `${signingInput}.${signature.toString('base64url')}`, expiresAt: new Date(claims.exp * 1000), claims };
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

/** Checks a session token's structure, algorithm, signature, time window, issuer and audience. */
export function verifyJwt(
  token: unknown,
  keys: VerificationKeys,
  now: Date,
  clockSkewSeconds: number = DEFAULT_CLOCK_SKEW_SECONDS,
): VerifiedJwt {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH) return refused('malformed');
  const segments = token.split('.');
  if (segments.length !== 3) return refused('malformed');
  const [encodedHeader = '', encodedPayload = '', encodedSignature = ''] = segments;

  const header = decodeJsonObject(encodedHeader);
  if (!header) return refused('malformed');
  // Only EdDSA: never `none`, never HMAC (which would let a public key act as a shared secret).
  if (header.alg !== JWT_ALGORITHM || header.crit !== undefined) return refused('unsupported_algorithm');
  if (header.typ !== undefined && header.typ !== 'JWT') return refused('malformed');
  const publicKey = typeof header.kid === 'string' ? keys.get(header.kid) : undefined;
  if (!publicKey) return refused('unknown_key');

  const signature = decodeBase64Url(encodedSignature);
  if (!signature || signature.length !== 64) return refused('malformed');
  const signingInput = Buffer.from(`${encodedHeader}.${encodedPayload}`, 'ascii');
  if (!verifyBytes(null, signingInput, publicKey, signature)) return refused('bad_signature');

  // From here on the payload is authentic (signed by our key); still check its shape.
  const payload = decodeJsonObject(encodedPayload);
  if (!payload) return refused('malformed');
  const { sub, email, admin, sv, iat, exp, nbf, iss, aud } = payload;
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
  if (iss !== JWT_ISSUER) return refused('wrong_issuer');
  if (!(aud === JWT_AUDIENCE || (Array.isArray(aud) && aud.includes(JWT_AUDIENCE)))) return refused('wrong_audience');

  const nowSeconds = now.getTime() / 1000;
  if (nowSeconds >= exp + clockSkewSeconds) return refused('expired');
  if (iat > nowSeconds + clockSkewSeconds || (nbf !== undefined && nbf > nowSeconds + clockSkewSeconds)) {
    return refused('not_yet_valid');
  }
  return {
    valid: true,
    claims: { sub, email, ...(admin === true ? { admin } : {}), sv, iat, exp, iss: JWT_ISSUER, aud: JWT_AUDIENCE },
  };
}

function refused(reason: JwtRejection): VerifiedJwt {
  return { valid: false, reason };
}

// ---------------------------------------------------------------------------------------------
// Encoding helpers

function encodeJson(value: object): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/**
 * Strict base64url: only the URL-safe alphabet, no padding, and canonical (re-encodes to the same
 * text), because Buffer.from(…, 'base64url') silently skips invalid characters.
 */
function decodeBase64Url(text: string): Buffer | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}

function decodeJsonObject(segment: string): Record<string, unknown> | undefined {
  const bytes = decodeBase64Url(segment);
  if (!bytes || bytes.length === 0) return undefined;
  try {
    const value: unknown = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    return isRecord(value) ? value : undefined;
  } catch {
    return undefined;
  }
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
