/**
 * Time-ordered UUIDs (RFC 9562 version 7): 48 bits of Unix milliseconds, then 74 random bits.
 * Rows keyed by one are inserted at the right-hand end of their primary-key index, so a table of
 * tens of millions of rows keeps inserting into a few hot pages instead of a random one each time
 * (docs/performance.md#cost-as-data-grows). The time they carry is the row's creation time, which
 * the row shows anyway; the random bits keep them unguessable.
 */
import { randomBytes } from 'node:crypto';

export function timeOrderedUuid(now: number = Date.now()): string {
  const bytes = randomBytes(16);
  // 48-bit big-endian millisecond timestamp.
  bytes.writeUIntBE(Math.floor(now), 0, 6);
  bytes[6] = 0x70 | (bytes[6]! & 0x0f); // version 7
  bytes[8] = 0x80 | (bytes[8]! & 0x3f); // RFC variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
