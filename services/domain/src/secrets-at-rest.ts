/**
 * Envelope encryption of secrets kept in Postgres (docs/architecture.md#secrets-at-rest): webhook secrets and JWT signing
 * keys. Each value gets a fresh 256-bit data key (DEK) that encrypts it with AES-256-GCM; the DEK
 * is itself encrypted (wrapped) with the key-encryption key SECRETS_KEK, also AES-256-GCM. What is
 * stored names the KEK by id, so a rotated KEK still opens older values while the rotation command
 * re-wraps them:
 *
 *   v1.<kek id>.<wrapped DEK: iv|ciphertext|tag, base64url>.<value: iv|ciphertext|tag, base64url>
 *
 * The value is bound to where it lives (`context`, e.g. "projects.webhook_secret:<project id>")
 * as additional authenticated data: a ciphertext copied to another row does not decrypt.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { Setting } from '@coinvoice/runtime';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface KeyEncryptionKey {
  /** First 16 hex digits of SHA-256 of the key: names it in stored values, reveals nothing. */
  id: string;
  key: Buffer;
}

export function kekFromBytes(key: Buffer): KeyEncryptionKey {
  if (key.length !== 32) throw new RangeError('a key-encryption key is 32 bytes');
  return { id: createHash('sha256').update(key).digest('hex').slice(0, 16), key };
}

/**
 * The KEK of development and tests when SECRETS_KEK is unset (production refuses to start
 * without it): derived from a public string, so it protects nothing but keeps one code path.
 */
export const DEVELOPMENT_KEK_BASE64 = createHash('sha256').update('coinvoice development KEK (not a secret)').digest('base64');

function parseKek(raw: string): KeyEncryptionKey | undefined {
  const trimmed = raw.trim();
  if (!/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) return undefined;
  const bytes = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  return bytes.length === 32 ? kekFromBytes(bytes) : undefined;
}

/** SECRETS_KEK: 32 random bytes, base64 (`openssl rand -base64 32`). Required in production. */
export const secretsKekSetting: Setting<KeyEncryptionKey> = {
  expected: '32 random bytes in base64 (openssl rand -base64 32)',
  devDefault: DEVELOPMENT_KEK_BASE64,
  parse: parseKek,
  // A key, mistyped or not, never reaches a log line.
  shown: false,
};

/** SECRETS_KEK_PREVIOUS: comma-separated older KEKs, still accepted for reading during a rotation. */
export const previousKeksSetting: Setting<KeyEncryptionKey[]> = {
  expected: 'comma-separated keys of 32 bytes in base64 (may be empty)',
  default: '',
  shown: false,
  parse(raw) {
    const keys: KeyEncryptionKey[] = [];
    for (const entry of raw.split(',').map((e) => e.trim()).filter((e) => e !== '')) {
      const key = parseKek(entry);
      if (!key) return undefined;
      keys.push(key);
    }
    return keys;
  },
};

function seal(key: Buffer, plaintext: Buffer, aad: Buffer): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, ciphertext, cipher.getAuthTag()]);
}

function open(key: Buffer, sealed: Buffer, aad: Buffer): Buffer {
  if (sealed.length < IV_BYTES + TAG_BYTES) throw new SecretDecryptionError('the sealed value is too short');
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES));
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
  } catch {
    throw new SecretDecryptionError('the value does not decrypt (wrong key, or a value moved from another row)');
  }
}

export class SecretDecryptionError extends Error {
  override name = 'SecretDecryptionError';
}

/** Encrypts with the current KEK; decrypts with it or any previous one. */
export class SecretBox {
  private readonly keys: Map<string, Buffer>;

  constructor(
    readonly current: KeyEncryptionKey,
    previous: readonly KeyEncryptionKey[] = [],
  ) {
    this.keys = new Map([...previous, current].map((k) => [k.id, k.key]));
  }

  encrypt(plaintext: string, context: string): string {
    const dek = randomBytes(32);
    const aad = Buffer.from(`${VERSION}:${context}`, 'utf8');
    const wrapped = seal(this.current.key, dek, Buffer.from(`${VERSION}:dek:${this.current.id}:${context}`, 'utf8'));
    const value = seal(dek, Buffer.from(plaintext, 'utf8'), aad);
    return [VERSION, this.current.id, wrapped.toString('base64url'), value.toString('base64url')].join('.');
  }

  decrypt(stored: string, context: string): string {
    const parts = stored.split('.');
    if (parts.length !== 4 || parts[0] !== VERSION) throw new SecretDecryptionError('not an encrypted value');
    const [, kekId = '', wrapped = '', value = ''] = parts;
    const kek = this.keys.get(kekId);
    if (!kek) throw new SecretDecryptionError(`encrypted with key ${kekId}, which is not configured (SECRETS_KEK / SECRETS_KEK_PREVIOUS)`);
    const dek = open(kek, Buffer.from(wrapped, 'base64url'), Buffer.from(`${VERSION}:dek:${kekId}:${context}`, 'utf8'));
    return open(dek, Buffer.from(value, 'base64url'), Buffer.from(`${VERSION}:${context}`, 'utf8')).toString('utf8');
  }

  /** The KEK id a stored value names (undefined when it is not an encrypted value). */
  static kekIdOf(stored: string): string | undefined {
    const parts = stored.split('.');
    return parts.length === 4 && parts[0] === VERSION ? parts[1] : undefined;
  }
}
