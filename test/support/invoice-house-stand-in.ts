/**
 * A stand-in for the invoice service's FindHouseAddress (docs/treasury.md#house-addresses), for the
 * payout service's tests: a real gRPC server on 127.0.0.1 answering from the addresses the test
 * names, compared without letter case as the invoice service compares EVM and bech32 addresses.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';

export class InvoiceHouseStandIn {
  /** Lower-case address → "deposit" or "treasury". */
  readonly houseAddresses = new Map<string, 'deposit' | 'treasury'>();
  /** Every address asked about, as asked. */
  readonly asked: string[] = [];
  /** When set, every call fails with Unavailable (invoice service down). */
  down = false;
  private server: http2.Http2Server | undefined;
  url = '';

  async start(): Promise<this> {
    const handler = connectNodeAdapter({
      routes: (router) => {
        router.rpc(InvoiceService.method.findHouseAddress, async (req) => {
          if (this.down) throw new ConnectError('invoice is down (test)', Code.Unavailable);
          this.asked.push(req.address);
          return { kind: this.houseAddresses.get(req.address.toLowerCase()) ?? '' };
        });
      },
    });
    this.server = http2.createServer(handler);
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
