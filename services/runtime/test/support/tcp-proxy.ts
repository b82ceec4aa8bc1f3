/**
 * A TCP proxy in front of a server that a test can cut: every open connection is reset (RST), as
 * when the process behind it is SIGKILLed or a node drops. Later connections pass through again.
 */
import net from 'node:net';

export class TcpProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  connections = 0;
  port = 0;

  constructor(private readonly targetPort: number) {
    this.server = net.createServer((client) => {
      this.connections++;
      const upstream = net.connect(this.targetPort, '127.0.0.1');
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Resets every open connection (the peer reads ECONNRESET). */
  cut(): void {
    for (const socket of this.sockets) socket.resetAndDestroy();
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
