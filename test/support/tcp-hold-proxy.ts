/**
 * A TCP proxy that can hold answers: while `holding`, what the server sends back is swallowed, so
 * a request reaches the server (e.g. the signer signs and audits it) but its caller never learns
 * the answer — a process killed mid-request, seen from the caller. New connections pass again once
 * released.
 */
import net from 'node:net';

export class TcpHoldProxy {
  holding = false;
  /** Bytes swallowed while holding. */
  swallowed = 0;
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      client.on('data', (chunk) => upstream.write(chunk));
      upstream.on('data', (chunk) => {
        if (this.holding) this.swallowed += chunk.length;
        else client.write(chunk);
      });
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  /** Stops holding and cuts every connection (their answers are lost; callers reconnect). */
  release(): void {
    this.holding = false;
    for (const socket of this.sockets) socket.destroy();
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
