/**
 * The cursor of `GET /api/events/stream` (an SSE event id; ListProjectEvents' cursor): the position
 * "<transaction id>.<seq>" of the last event a listener read, or a bare seq handed out before
 * positions named their transaction (docs/webhook-delivery.md#the-listen-stream). The gateway
 * refuses anything else with 400; the notifier parses the same way.
 */
const MAX_XID8 = 2n ** 64n - 1n;
const MAX_BIGINT = 2n ** 63n - 1n;

/** A listener's cursor; `tx` undefined for a bare seq. */
export interface EventStreamCursor {
  tx: string | undefined;
  seq: string;
}

/** The digits a cursor may have (the OpenAPI pattern); the ranges are checked by parseEventStreamCursor. */
export const EVENT_STREAM_CURSOR_PATTERN = '^(0|[1-9]\\d{0,19})(\\.(0|[1-9]\\d{0,18}))?$';

/** The cursor's parts, or undefined when it is not one. */
export function parseEventStreamCursor(text: string): EventStreamCursor | undefined {
  const match = new RegExp(EVENT_STREAM_CURSOR_PATTERN).exec(text);
  if (!match) return undefined;
  const first = match[1]!;
  const second = match[3];
  if (second === undefined) return BigInt(first) <= MAX_BIGINT ? { tx: undefined, seq: first } : undefined;
  return BigInt(first) <= MAX_XID8 && BigInt(second) <= MAX_BIGINT ? { tx: first, seq: second } : undefined;
}
