/**
 * The server the services' stand-ins share (auth, notifier, invoice): a real plaintext gRPC server
 * on a free port of 127.0.0.1, serving the routes a stand-in registers.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { connectNodeAdapter, type ConnectNodeAdapterOptions } from '@connectrpc/connect-node';

export interface StandInServer {
  url: string;
  stop(): Promise<void>;
}

export async function startStandInServer(routes: ConnectNodeAdapterOptions['routes']): Promise<StandInServer> {
  const server = http2.createServer(connectNodeAdapter({ routes }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
