/**
 * Sealed listen cursors (docs/webhook-delivery.md#the-listen-stream): a position "<tx>.<seq>" is
 * encrypted with AES-256-GCM under a key derived from the notifier's event signing key (every
 * replica holds it), its project as associated data. A listener's cursor then says nothing of
 * other projects' events between two of its own, nor of the cluster's transaction count (an
 * outside review read both from plain positions), and a cursor of one project does not open for
 * another.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** A position: after the event (tx, seq); seq 0 is before a transaction's first event. */
export interface ListenPosition {
  tx: string;
  seq: string;
}

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const MAX_XID8 = 2n ** 64n - 1n;
const MAX_BIGINT = 2n ** 63n - 1n;

export class ListenCursors {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('a listen cursor key is 32 bytes');
  }

  seal(projectId: string, position: ListenPosition): string {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce);
    cipher.setAAD(Buffer.from(projectId, 'utf8'));
    const sealed = Buffer.concat([cipher.update(`${position.tx}.${position.seq}`, 'utf8'), cipher.final()]);
    return Buffer.concat([nonce, sealed, cipher.getAuthTag()]).toString('base64url');
  }

  /** The position, or undefined for a token this key did not seal for this project. */
  open(projectId: string, token: string): ListenPosition | undefined {
    const bytes = Buffer.from(token, 'base64url');
    if (bytes.length <= NONCE_BYTES + TAG_BYTES) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, bytes.subarray(0, NONCE_BYTES));
      decipher.setAAD(Buffer.from(projectId, 'utf8'));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      const text = Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
      const match = /^(0|[1-9]\d{0,19})\.(0|[1-9]\d{0,18})$/.exec(text);
      if (!match || BigInt(match[1]!) > MAX_XID8 || BigInt(match[2]!) > MAX_BIGINT) return undefined;
      return { tx: match[1]!, seq: match[2]! };
    } catch {
      return undefined;
    }
  }
}
