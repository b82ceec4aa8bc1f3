/**
 * A stand-in for the payout service's signer (`payout sign`, SignerService in
 * proto/coinvoice/signer/v1/signer.proto) for developing the processor: a real gRPC server on
 * 127.0.0.1 that signs with viem from a fixed TEST mnemonic, with NO policy — it signs whatever it
 * is asked. Keys as docs/treasury.md#keys: treasury account/1/0, deposit index i account/0/i
 * (m/44'/60'/0'). Tests of the processor's guarantees run against the real signer when present.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { keccak256, type Hex } from 'viem';
import { mnemonicToAccount } from 'viem/accounts';
import { SignerService } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';

/** A throwaway mnemonic for tests only (never funded anywhere but a test's anvil). */
export const TEST_SIGNER_MNEMONIC = 'spoon timber job inch strategy sea casual garden gentle latin early pole';

/** The treasury account (account/1/0) of the test mnemonic. */
export const treasuryAccount = (mnemonic = TEST_SIGNER_MNEMONIC) => mnemonicToAccount(mnemonic, { accountIndex: 0, changeIndex: 1, addressIndex: 0 });
/** The deposit account of receive index `index` (account/0/index): the invoice service's address. */
export const depositAccount = (index: number, mnemonic = TEST_SIGNER_MNEMONIC) => mnemonicToAccount(mnemonic, { accountIndex: 0, changeIndex: 0, addressIndex: index });

export class SignerStandIn {
  /** Requests answered, by purpose. */
  readonly signed: Array<{ purpose: string; nonce: bigint; to: string }> = [];
  private server: http2.Http2Server | undefined;
  url = '';

  constructor(private readonly mnemonic = TEST_SIGNER_MNEMONIC) {}

  async start(): Promise<this> {
    const handler = connectNodeAdapter({
      routes: (router) => {
        router.rpc(SignerService.method.getTreasury, async (req) => ({ network: req.network, address: treasuryAccount(this.mnemonic).address }));
        router.rpc(SignerService.method.signEvmTransaction, async (req) => {
          const tx = req.transaction;
          if (!tx) throw new ConnectError('transaction missing', Code.InvalidArgument);
          const purpose = req.purpose;
          const account =
            purpose.case === 'sweep' ? depositAccount(purpose.value.addressIndex, this.mnemonic)
            : purpose.case === 'payout' || purpose.case === 'gasTopUp' ? treasuryAccount(this.mnemonic)
            : undefined;
          if (!account) throw new ConnectError('purpose missing', Code.InvalidArgument);
          const raw = await account.signTransaction({
            type: 'eip1559',
            chainId: Number(tx.chainId),
            nonce: Number(tx.nonce),
            to: tx.to as Hex,
            value: BigInt(tx.value),
            data: tx.data as Hex,
            gas: tx.gasLimit,
            maxFeePerGas: BigInt(tx.maxFeePerGas),
            maxPriorityFeePerGas: BigInt(tx.maxPriorityFeePerGas),
          });
          this.signed.push({ purpose: purpose.case ?? '', nonce: tx.nonce, to: tx.to });
          return { rawTransaction: raw, transactionHash: keccak256(raw), from: account.address };
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
