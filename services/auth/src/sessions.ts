/**
 * Session tokens backed by the signing keys in the database, so every replica signs with the same
 * active key and publishes the same JWKS. Each signature reads the active key (one indexed row):
 * right after a rotation on any replica, every replica signs with the new key. Parsed keys are
 * cached by kid, so the PEM is parsed once per key and process.
 */
import { DEFAULT_CLOCK_SKEW_SECONDS, generateSigningKey, publicJwkOf, signingKeyFromPem, signingKeyToPem, signSessionToken, type Ed25519Jwk, type IssuedSessionToken, type SessionSubject, type SigningKey, type VerifiedJwt, verifyJwt } from '@coinvoice/domain/credentials/jwt';
import type { SigningKeyRow } from './store/rows';
import type { SigningKeyStore } from './store/signing-keys';

/**
 * How long past `retired_at + session TTL` a retired key stays published: covers the verifier's
 * clock-skew allowance (a token is accepted until exp + skew) and clock differences between
 * replicas and the database.
 */
export const RETIRED_KEY_GRACE_SECONDS = DEFAULT_CLOCK_SKEW_SECONDS + 90;

export class SessionTokens {
  private readonly parsed = new Map<string, SigningKey>();

  constructor(
    private readonly store: SigningKeyStore,
    private readonly ttlSeconds: number,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Seconds a retired key stays in the JWKS: every token it signed has expired by then. */
  get retentionSeconds(): number {
    return this.ttlSeconds + RETIRED_KEY_GRACE_SECONDS;
  }

  /** Creates the first signing key unless one is active (safe with replicas starting together). */
  async ensureSigningKey(): Promise<void> {
    this.remember(await this.store.ensureActive(newStoredKey));
  }

  async issue(subject: SessionSubject): Promise<IssuedSessionToken> {
    const row = (await this.store.findActive()) ?? (await this.store.ensureActive(newStoredKey));
    return signSessionToken(this.remember(row), subject, { now: this.now(), ttlSeconds: this.ttlSeconds });
  }

  /** Public keys whose tokens may still be valid, the active key first. */
  async publicKeys(): Promise<Ed25519Jwk[]> {
    const rows = await this.store.listLive(this.retentionSeconds);
    // Forget parsed keys that are no longer published (deleted or past retention).
    const live = new Set(rows.map((row) => row.kid));
    for (const kid of this.parsed.keys()) if (!live.has(kid)) this.parsed.delete(kid);
    return rows.map((row) => publicJwkOf(this.remember(row)));
  }

  /** Checks a token against every published key (signature, time window, issuer, audience). */
  async verify(token: string): Promise<VerifiedJwt> {
    const rows = await this.store.listLive(this.retentionSeconds);
    const keys = new Map(rows.map((row) => [row.kid, this.remember(row).publicKey]));
    return verifyJwt(token, keys, this.now());
  }

  /** A new active key; the previous one stays published until its tokens have expired. */
  async rotate(): Promise<Ed25519Jwk> {
    const row = await this.store.rotate(newStoredKey(), this.retentionSeconds);
    return publicJwkOf(this.remember(row));
  }

  private remember(row: SigningKeyRow): SigningKey {
    let key = this.parsed.get(row.kid);
    if (!key) {
      key = signingKeyFromPem(row.private_key_pem);
      if (key.kid !== row.kid) throw new Error(`signing key ${row.kid}: stored kid does not match its key`);
      this.parsed.set(row.kid, key);
    }
    return key;
  }
}

function newStoredKey(): { kid: string; privateKeyPem: string } {
  const key = generateSigningKey();
  return { kid: key.kid, privateKeyPem: signingKeyToPem(key) };
}
