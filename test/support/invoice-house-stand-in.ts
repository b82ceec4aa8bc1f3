/**
 * A stand-in for the invoice service's FindHouseAddress (docs/treasury.md#house-addresses), for the
 * payout service's tests: a real gRPC server on 127.0.0.1 answering from the addresses the test
 * names, compared without letter case as the invoice service compares EVM and bech32 addresses.
 * Also ListLedgerCredits, in one page: the credits a test says the invoice service reported.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { startStandInServer, type StandInServer } from './grpc-stand-in';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { LedgerCreditSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';

export class InvoiceHouseStandIn {
  /** Lower-case address → "deposit" or "treasury". */
  readonly houseAddresses = new Map<string, 'deposit' | 'treasury'>();
  /** Every address asked about, as asked. */
  readonly asked: string[] = [];
  /** What ListLedgerCredits answers: the credits "reported" to the ledger. */
  readonly reportedCredits: MessageInitShape<typeof LedgerCreditSchema>[] = [];
  /** When set, every call fails with Unavailable (invoice service down). */
  down = false;
  private server: StandInServer | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = await startStandInServer((router) => {
      router.rpc(InvoiceService.method.findHouseAddress, async (req) => {
        if (this.down) throw new ConnectError('invoice is down (test)', Code.Unavailable);
        this.asked.push(req.address);
        return { kind: this.houseAddresses.get(req.address.toLowerCase()) ?? '' };
      });
      router.rpc(InvoiceService.method.listLedgerCredits, async (req) => {
        if (this.down) throw new ConnectError('invoice is down (test)', Code.Unavailable);
        return { credits: req.afterInvoiceId === '' ? this.reportedCredits : [], nextAfterInvoiceId: '' };
      });
    });
    this.url = this.server.url;
    return this;
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }
}
