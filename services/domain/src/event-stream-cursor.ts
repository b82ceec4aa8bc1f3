/**
 * The cursor of `GET /api/events/stream` (an SSE event id; ListProjectEvents' cursor): a sealed
 * token the notifier alone reads — the position of the last event a listener read, encrypted and
 * bound to its project, so a cursor tells nothing of other projects or of the database — or a bare
 * seq handed out before positions (docs/webhook-delivery.md#the-listen-stream). The gateway
 * refuses any other shape with 400; whether a token opens is the notifier's to say.
 */
const MAX_BIGINT = 2n ** 63n - 1n;

/** A listener's cursor as written: a sealed token, or a bare seq of before. */
export type EventStreamCursor = { kind: 'token'; token: string } | { kind: 'seq'; seq: string };

/** The shapes a cursor may have (the OpenAPI pattern); a bare seq's range is checked by parseEventStreamCursor. */
export const EVENT_STREAM_CURSOR_PATTERN = '^((0|[1-9]\\d{0,18})|[A-Za-z0-9_-]{40,120})$';

/** The cursor's kind, or undefined when it is none. */
export function parseEventStreamCursor(text: string): EventStreamCursor | undefined {
  if (/^(0|[1-9]\d{0,18})$/.test(text)) return BigInt(text) <= MAX_BIGINT ? { kind: 'seq', seq: text } : undefined;
  return /^[A-Za-z0-9_-]{40,120}$/.test(text) ? { kind: 'token', token: text } : undefined;
}
