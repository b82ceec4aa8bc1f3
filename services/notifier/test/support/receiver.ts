/**
 * A webhook receiver for tests: a real HTTP server on 127.0.0.1 (development mode allows loopback
 * destinations) that records every request and answers as the test scripts it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

export type Responder = (req: ReceivedRequest, index: number) => { status: number; body?: string; delayMs?: number } | 'hang';

/** A real HTTP server on 127.0.0.1 that records every request and answers as the test says. */
export class Receiver {
  readonly requests: ReceivedRequest[] = [];
  private readonly waiters: Array<() => void> = [];
  private readonly hanging = new Set<http.ServerResponse>();
  private server: http.Server | undefined;
  url = '';

  constructor(public respond: Responder = () => ({ status: 200 })) {}

  /** Listens on `host` (any 127.x.y.z is loopback on Linux: distinct hosts for the per-host limit). */
  async start(host = '127.0.0.1'): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const received = { path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
        const index = this.requests.length;
        this.requests.push(received);
        for (const wake of this.waiters.splice(0)) wake();
        const answer = this.respond(received, index);
        if (answer === 'hang') {
          this.hanging.add(res);
          res.on('close', () => this.hanging.delete(res));
          return;
        }
        const send = () => res.writeHead(answer.status, { 'content-type': 'text/plain' }).end(answer.body ?? 'ok');
        if (answer.delayMs) setTimeout(send, answer.delayMs);
        else send();
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, host, resolve));
    this.url = `http://${host}:${(this.server.address() as AddressInfo).port}/hooks`;
    return this;
  }

  /** Resolves once `count` requests (matching `filter`) arrived; rejects after `timeoutMs`. */
  async waitFor(count: number, timeoutMs = 15_000, filter: (r: ReceivedRequest) => boolean = () => true): Promise<ReceivedRequest[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const matching = this.requests.filter(filter);
      if (matching.length >= count) return matching;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`receiver got ${matching.length} of ${count} requests within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Answers every request left hanging with `status`. */
  release(status = 200): void {
    for (const res of this.hanging) res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
    this.hanging.clear();
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/** Polls `check` until it returns a value other than undefined; fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
