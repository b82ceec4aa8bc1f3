/**
 * Merchant passwords: argon2id via Node's built-in `crypto.argon2` (Node >= 24.7, no native npm
 * addon), stored as a PHC string `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>` (base64 without
 * padding, as the reference implementation and the `argon2` npm package write it, so hashes stay
 * portable). Verification reads the parameters from the stored string, so raising the cost later
 * keeps old hashes verifiable; `needsRehash` tells the service when to re-hash after a login.
 */
import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';

export interface Argon2idParams {
  /** Memory cost in KiB. */
  memoryKiB: number;
  /** Time cost (iterations). */
  passes: number;
  parallelism: number;
  saltBytes: number;
  hashBytes: number;
}

/** OWASP Password Storage Cheat Sheet minimum for argon2id: m=19 MiB, t=2, p=1. */
export const OWASP_ARGON2ID_PARAMS: Readonly<Argon2idParams> = {
  memoryKiB: 19 * 1024,
  passes: 2,
  parallelism: 1,
  saltBytes: 16,
  hashBytes: 32,
};

export const PASSWORD_MIN_LENGTH = 8;
export const PASSWORD_MAX_LENGTH = 128;

/** Upper bounds on parameters read from a stored hash, so a corrupted row cannot demand 4 GiB. */
const MAX_STORED_MEMORY_KIB = 1024 * 1024;
const MAX_STORED_PASSES = 64;
const MAX_STORED_PARALLELISM = 16;
const ARGON2_VERSION = 19;

/** Why a new password is refused (undefined when acceptable). Length counts Unicode code points. */
export function passwordPolicyViolation(password: string): string | undefined {
  const length = [...password].length;
  if (length < PASSWORD_MIN_LENGTH) return `must be at least ${PASSWORD_MIN_LENGTH} characters`;
  if (length > PASSWORD_MAX_LENGTH) return `must be at most ${PASSWORD_MAX_LENGTH} characters`;
  return undefined;
}

interface PhcArgon2id {
  memoryKiB: number;
  passes: number;
  parallelism: number;
  salt: Buffer;
  hash: Buffer;
}

export class PasswordHasher {
  readonly params: Readonly<Argon2idParams>;
  /** A throwaway hash with the current parameters, made up front so the first unknown email is not slower. */
  private readonly dummyHash: Promise<string>;

  constructor(params: Readonly<Argon2idParams> = OWASP_ARGON2ID_PARAMS) {
    if (typeof argon2 !== 'function') {
      throw new Error('crypto.argon2 is missing: this Node.js is older than 24.7');
    }
    if (params.memoryKiB < 8 * params.parallelism || params.passes < 1 || params.parallelism < 1) {
      throw new RangeError('argon2id needs memoryKiB >= 8 * parallelism, passes >= 1, parallelism >= 1');
    }
    if (params.saltBytes < 16 || params.hashBytes < 16) throw new RangeError('salt and hash must be at least 16 bytes');
    this.params = { ...params };
    this.dummyHash = this.hash(randomBytes(16).toString('base64'));
    // Observed here so a failure surfaces in verifyDummy, not as an unhandled rejection.
    this.dummyHash.catch(() => undefined);
  }

  /** A PHC string for the password (the policy is checked by validation, not here). */
  async hash(password: string): Promise<string> {
    const { memoryKiB, passes, parallelism, saltBytes, hashBytes } = this.params;
    const salt = randomBytes(saltBytes);
    const hash = await deriveArgon2id(password, { memoryKiB, passes, parallelism, salt }, hashBytes);
    return formatPhc({ memoryKiB, passes, parallelism, salt, hash });
  }

  /**
   * Whether `password` matches the stored PHC string, compared in constant time.
   * Throws when `storedHash` is not an argon2id PHC string: that is corrupt data, not a wrong password.
   */
  async verify(password: string, storedHash: string): Promise<boolean> {
    const stored = parsePhc(storedHash);
    if (!stored) throw new Error('stored password hash is not an argon2id PHC string');
    const candidate = await deriveArgon2id(password, stored, stored.hash.length);
    return timingSafeEqual(candidate, stored.hash);
  }

  /**
   * Spends the same work as `verify` against a hash with the current parameters, then answers
   * false. Call it when the email is unknown so that case is not told apart by response time.
   */
  async verifyDummy(password: string): Promise<false> {
    await this.verify(password, await this.dummyHash);
    return false;
  }

  /** True when the stored hash used other parameters than the current ones (re-hash after login). */
  needsRehash(storedHash: string): boolean {
    const stored = parsePhc(storedHash);
    return (
      !stored ||
      stored.memoryKiB !== this.params.memoryKiB ||
      stored.passes !== this.params.passes ||
      stored.parallelism !== this.params.parallelism ||
      stored.salt.length !== this.params.saltBytes ||
      stored.hash.length !== this.params.hashBytes
    );
  }
}

function deriveArgon2id(
  password: string,
  params: Pick<PhcArgon2id, 'memoryKiB' | 'passes' | 'parallelism' | 'salt'>,
  hashBytes: number,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    argon2(
      'argon2id',
      {
        // NFKC so the same password typed on different keyboards/OSes hashes the same (NIST SP 800-63B).
        message: Buffer.from(password.normalize('NFKC'), 'utf8'),
        nonce: params.salt,
        memory: params.memoryKiB,
        passes: params.passes,
        parallelism: params.parallelism,
        tagLength: hashBytes,
      },
      (err, derived) => (err ? reject(err) : resolve(derived)),
    );
  });
}

function formatPhc(phc: PhcArgon2id): string {
  return (
    `$argon2id$v=${ARGON2_VERSION}$m=${phc.memoryKiB},t=${phc.passes},p=${phc.parallelism}` +
    `$${phc.salt.toString('base64').replace(/=+$/, '')}$${phc.hash.toString('base64').replace(/=+$/, '')}`
  );
}

/** Salt >= 8 bytes (11 base64 characters, the argon2 minimum), hash >= 16 bytes. */
const PHC_PATTERN =
  /^\$argon2id\$v=19\$m=([1-9][0-9]{0,9}),t=([1-9][0-9]{0,9}),p=([1-9][0-9]{0,9})\$([A-Za-z0-9+/]{11,})\$([A-Za-z0-9+/]{22,})$/;

function parsePhc(text: string): PhcArgon2id | undefined {
  const match = PHC_PATTERN.exec(text);
  if (!match) return undefined;
  const [, memory, passes, parallelism, salt, hash] = match;
  const parsed = {
    memoryKiB: Number(memory),
    passes: Number(passes),
    parallelism: Number(parallelism),
    salt: Buffer.from(salt ?? '', 'base64'),
    hash: Buffer.from(hash ?? '', 'base64'),
  };
  const sane =
    parsed.memoryKiB >= 8 * parsed.parallelism &&
    parsed.memoryKiB <= MAX_STORED_MEMORY_KIB &&
    parsed.passes <= MAX_STORED_PASSES &&
    parsed.parallelism <= MAX_STORED_PARALLELISM;
  return sane ? parsed : undefined;
}
