/**
 * Structured JSON logs (pino) that carry the request id of the work in hand. The id travels
 * gateway → gRPC metadata (`x-request-id`) → outbox row → NATS header, and every log line written
 * while handling that work carries it without being passed around.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import pino, { type Logger } from 'pino';

export type { Logger } from 'pino';

export const REQUEST_ID_HEADER = 'x-request-id';

interface RequestContext {
  requestId: string;
}

const requestContext = new AsyncLocalStorage<RequestContext>();

/** Runs `fn` with `requestId` as the current request id (a fresh one when none is given). */
export function withRequestId<T>(requestId: string | undefined, fn: () => T): T {
  return requestContext.run({ requestId: requestId || randomUUID() }, fn);
}

export function currentRequestId(): string | undefined {
  return requestContext.getStore()?.requestId;
}

/** Only printable ASCII, bounded: a request id arrives from outside and lands in logs and headers. */
export function sanitizeRequestId(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  return /^[\x21-\x7e]{1,128}$/.test(trimmed) ? trimmed : undefined;
}

export interface LoggerOptions {
  service: string;
  level?: string;
  /** Tests pass a destination to read what was logged. */
  destination?: pino.DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: { service: options.service },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      mixin() {
        const requestId = currentRequestId();
        return requestId ? { requestId } : {};
      },
      // A net under mistakes: a one-time code logged by name. Not `*.code`: that hid every error's
      // code (errno, SQLSTATE, NATS), what an operator reads an outage by (an outside review).
      redact: {
        paths: ['password', '*.password', 'key', '*.key', 'code', 'body.code', 'request.code', 'req.code', 'token', '*.token', 'secret', '*.secret'],
        censor: '[redacted]',
      },
    },
    options.destination,
  );
}
