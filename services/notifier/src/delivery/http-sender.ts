/**
 * One HTTP attempt of a webhook: POST the exact body with the exact headers, to exactly the
 * addresses the SSRF guard vetted (pinnedLookup: nothing re-resolves the name behind its back),
 * no redirects followed, everything within the timeout. Over a kept-alive connection opened to
 * those same vetted addresses (connections.ts); a pooled connection the receiver closed just as
 * it was reused is replaced by a fresh one within the same attempt.
 */
import http from 'node:http';
import https from 'node:https';
import { pinnedLookup, type DestinationVerdict } from '@coinvoice/domain/ssrf';
import type { WebhookConnections } from './connections';

/** How much of a response body is kept for the delivery log. */
export const RESPONSE_EXCERPT_BYTES = 1024;

export type HttpAttempt =
  | { kind: 'response'; status: number; bodyExcerpt: string; durationMs: number }
  | { kind: 'timeout'; durationMs: number; error: string }
  | { kind: 'connection_error'; durationMs: number; error: string };

export interface HttpSender {
  post(params: {
    verdict: Extract<DestinationVerdict, { ok: true }>;
    headers: Record<string, string>;
    body: string;
    /** Time left for this attempt. */
    timeoutMs: number;
    /** The configured attempt limit, named in the error (the time left may be a little less). */
    limitMs?: number;
  }): Promise<HttpAttempt>;
}

/** Errors of a reused connection the receiver had already closed: nothing was answered on it. */
const STALE_CONNECTION_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

export function nodeHttpSender(connections: WebhookConnections): HttpSender {
  return {
    async post(params) {
      const started = performance.now();
      const first = await postOnce(params, connections.agentFor(params.verdict), started);
      if (first !== 'stale') return first;
      // The receiver closed the idle connection as we sent on it (keep-alive race): once more on
      // a fresh connection, within the same time limit. The same webhook-id: receivers dedupe.
      const again = await postOnce(params, false, started);
      return again === 'stale' ? { kind: 'connection_error', durationMs: Math.round(performance.now() - started), error: 'ECONNRESET: socket hang up' } : again;
    },
  };
}

function postOnce(
  { verdict, headers, body, timeoutMs, limitMs }: Parameters<HttpSender['post']>[0],
  agent: http.Agent | false,
  started: number,
): Promise<HttpAttempt | 'stale'> {
  const elapsed = () => Math.round(performance.now() - started);
  const client = verdict.url.protocol === 'https:' ? https : http;
  return new Promise<HttpAttempt | 'stale'>((resolve) => {
    let settled = false;
    const finish = (attempt: HttpAttempt | 'stale') => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(attempt);
    };
    const req = client.request(verdict.url, {
      method: 'POST',
      headers,
      lookup: pinnedLookup(verdict),
      agent,
    });
    let status: number | undefined;
    /** When the status arrived: what "answered within the limit" is judged by. */
    let statusMs = 0;
    const chunks: Buffer[] = [];
    let kept = 0;
    const excerpt = () => Buffer.concat(chunks).toString('utf8').replace(/\uFFFD+$/, '');
    const timer = setTimeout(() => {
      if (status !== undefined) {
        // The status came in time; the body did not finish: the answer counts, the rest is cut.
        // Its duration is the status's, so the answer is judged in time, as it was (a receiver
        // that acknowledged with 200 and then trickled its body was retried, its log showing 200).
        finish({ kind: 'response', status, bodyExcerpt: excerpt(), durationMs: statusMs });
      } else {
        finish({ kind: 'timeout', durationMs: elapsed(), error: `no response within ${limitMs ?? timeoutMs} ms` });
      }
      req.destroy();
    }, Math.max(1, timeoutMs - elapsed()));
    req.on('response', (res) => {
      status = res.statusCode ?? 0;
      statusMs = elapsed();
      res.on('data', (chunk: Buffer) => {
        if (kept < RESPONSE_EXCERPT_BYTES) {
          const part = chunk.subarray(0, RESPONSE_EXCERPT_BYTES - kept);
          chunks.push(part);
          kept += part.length;
        }
        if (kept >= RESPONSE_EXCERPT_BYTES) {
          // Enough for the log: stop reading, do not let a huge body cost time or memory (the
          // connection goes with it: it is not returned to the pool half read).
          finish({ kind: 'response', status: status ?? 0, bodyExcerpt: excerpt(), durationMs: elapsed() });
          res.destroy();
        }
      });
      res.on('end', () => finish({ kind: 'response', status: status ?? 0, bodyExcerpt: excerpt(), durationMs: elapsed() }));
      res.on('error', () => finish({ kind: 'response', status: status ?? 0, bodyExcerpt: excerpt(), durationMs: elapsed() }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (status !== undefined) {
        finish({ kind: 'response', status, bodyExcerpt: excerpt(), durationMs: elapsed() });
        return;
      }
      if (req.reusedSocket && err.code !== undefined && STALE_CONNECTION_CODES.has(err.code)) {
        finish('stale');
        return;
      }
      const text = err.code && !err.message.includes(err.code) ? `${err.code}: ${err.message}` : err.message;
      finish({ kind: 'connection_error', durationMs: elapsed(), error: text });
    });
    req.end(body);
  });
}
