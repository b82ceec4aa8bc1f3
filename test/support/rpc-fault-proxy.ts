/**
 * A JSON-RPC proxy in front of a real node that a test can make misbehave: answer `null` for
 * blocks, answer JSON-RPC errors, hang (the client times out), or be down (connections refused).
 * Broadcasts (eth_sendRawTransaction) can be held on their own: never forwarded (`hold`), or
 * forwarded to the node with the answer never returned (`forward_no_answer`) — the moments between
 * signing, broadcasting and recording that a kill must survive — or refused with a JSON-RPC error
 * without reaching the node (`refuse`, as a node refuses an underpriced transaction). Everything else is forwarded to the
 * node unchanged.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Fault = 'none' | 'null_blocks' | 'rpc_error' | 'hang' | 'down';
export type SendFault = 'none' | 'hold' | 'forward_no_answer' | 'refuse';

export class RpcFaultProxy {
  fault: Fault = 'none';
  /** What happens to eth_sendRawTransaction calls (single calls, not batches). */
  sendFault: SendFault = 'none';
  /** Broadcasts held by `sendFault`, in order: their raw transactions. */
  readonly heldSends: string[] = [];
  /** Requests answered with a fault, by kind. */
  readonly injected: Record<Exclude<Fault, 'none'>, number> = { null_blocks: 0, rpc_error: 0, hang: 0, down: 0 };
  /** The method of every call received, in order (batches flattened). */
  readonly methods: string[] = [];
  private server: http.Server | undefined;
  private port = 0;
  private readonly hanging = new Set<http.ServerResponse>();

  constructor(private readonly target: string) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(port = 0): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => void this.answer(Buffer.concat(chunks).toString('utf8'), res));
    });
    await new Promise<void>((resolve) => this.server?.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** Stops listening (connections refused) until `up()`. */
  async down(): Promise<void> {
    this.fault = 'down';
    for (const res of this.hanging) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = undefined;
  }

  async up(): Promise<void> {
    this.fault = 'none';
    if (!this.server) await this.start(this.port);
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private async answer(body: string, res: http.ServerResponse): Promise<void> {
    const request = JSON.parse(body) as { id: number; method: string } | Array<{ id: number; method: string }>;
    const calls = Array.isArray(request) ? request : [request];
    for (const call of calls) this.methods.push(call.method);
    const single = Array.isArray(request) ? undefined : (request as { method: string; params?: unknown[] });
    if (this.sendFault !== 'none' && single?.method === 'eth_sendRawTransaction') {
      this.heldSends.push(String(single.params?.[0]));
      if (this.sendFault === 'refuse') {
        const refusal = { jsonrpc: '2.0', id: (single as { id?: number }).id, error: { code: -32000, message: 'transaction underpriced (injected)' } };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(refusal));
        return;
      }
      if (this.sendFault === 'forward_no_answer') {
        await fetch(this.target, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then((r) => r.text()).catch(() => undefined);
      }
      this.hanging.add(res);
      res.on('close', () => this.hanging.delete(res));
      return;
    }
    if (this.fault === 'hang') {
      this.injected.hang++;
      this.hanging.add(res);
      res.on('close', () => this.hanging.delete(res));
      return;
    }
    if (this.fault === 'rpc_error') {
      this.injected.rpc_error++;
      const errors = calls.map((c) => ({ jsonrpc: '2.0', id: c.id, error: { code: -32000, message: 'header not found (injected)' } }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(Array.isArray(request) ? errors : errors[0]));
      return;
    }
    if (this.fault === 'null_blocks' && calls.every((c) => c.method.startsWith('eth_getBlockBy'))) {
      this.injected.null_blocks++;
      const nulls = calls.map((c) => ({ jsonrpc: '2.0', id: c.id, result: null }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(Array.isArray(request) ? nulls : nulls[0]));
      return;
    }
    try {
      const upstream = await fetch(this.target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(await upstream.text());
    } catch (err) {
      res.writeHead(502).end(String(err));
    }
  }
}
