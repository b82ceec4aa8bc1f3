/**
 * The Tron side of the treasury tests (docs/treasury.md#tron): the test seed's Tron account
 * (m/44'/195'/0', INVOICE_XPUB_TRX) and treasury (account/1/0), derived here with the independent
 * codecs (not the signer's TronSigningKeys), fresh payout addresses, and the node calls a
 * processor makes, against the Tron stand-in.
 */
import { randomBytes } from 'node:crypto';
import { HDKey } from '@scure/bip32';
import { mnemonicToSeedSync } from '@scure/bip39';
import { base58CheckEncode, ethereumKeyHash } from '../../../invoice/test/support/independent-codecs';
import { TronStandIn } from '../../../invoice/test/support/tron-stand-in';
import { TronNode, type NodeTransaction } from '../../src/processor/tron/node';

export type { NodeTransaction };
import { TestCertificateAuthority } from '../../../../test/support/certificates';
import { TcpHoldProxy } from '../../../../test/support/tcp-hold-proxy';
import { startPayoutHarness, type Harness } from './harness';
import { TEST_MNEMONIC } from './signer';
import { payoutHelpers, spawnRole, startSignerProcess, type PayoutHelpers, type ProcessorProcess, type SignerProcess } from './treasury';

const tronAccount = HDKey.fromMasterSeed(mnemonicToSeedSync(TEST_MNEMONIC)).derive("m/44'/195'/0'");
const treasuryKey = tronAccount.deriveChild(1).deriveChild(0);

export const TEST_TRON_XPUB = tronAccount.publicExtendedKey;
export const TEST_TRON_TREASURY = base58CheckEncode(Buffer.concat([Buffer.of(0x41), ethereumKeyHash(treasuryKey.publicKey!)]));

/** A Tron address nobody holds a key of (a payout destination, a token contract). */
export function freshTronAddress(): string {
  return base58CheckEncode(Buffer.concat([Buffer.of(0x41), randomBytes(20)]));
}

/** The node's JSON answer to a POST of `body` to `path`. */
export async function tronCall(url: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return (await response.json()) as Record<string, unknown>;
}

/** The processor's node client (src/processor/tron/node.ts) on `url`: a test builds transfers as the processor does. */
function nodeAt(url: string): TronNode {
  return new TronNode({ url, timeoutMs: 5_000 });
}

/** A node-built TRX transfer (visible: base58 addresses). */
export async function createTrxTransfer(url: string, from: string, to: string, sun: bigint): Promise<NodeTransaction> {
  return nodeAt(url).createTransfer(from, to, sun);
}

/** A node-built TRC-20 transfer(to, amount) call of `contract`. */
export async function createTrc20Transfer(url: string, contract: string, from: string, to: string, amount: bigint, feeLimit: number): Promise<NodeTransaction> {
  return nodeAt(url).createTokenTransfer(contract, from, to, amount, BigInt(feeLimit));
}

/** The node's raw JSON answer to a broadcast (java-tron's {result, txid} or {code, message}). */
export async function broadcast(url: string, tx: NodeTransaction, signature: string) {
  return tronCall(url, '/wallet/broadcasttransaction', { ...tx, signature: [signature], visible: true });
}

/**
 * The Tron treasury world (docs/treasury.md#tron): the Tron stand-in (in this process), the payout
 * service's harness to create payouts through its own handlers, the real signer
 * (`main.js sign`, the test seed, INVOICE_XPUB_TRX, mutual TLS) and the built processor
 * (`main.js process tron`), each a child killed with SIGKILL. The treasury is funded with TRX and
 * the stand-in's USDT.
 */
export interface TronWorld extends PayoutHelpers<string> {
  tron: TronStandIn;
  h: Harness;
  signer: SignerProcess;
  /** The processors' way to the signer: a test holds its answers. */
  signerLink: TcpHoldProxy;
  usdt: string;
  startProcessor(env?: NodeJS.ProcessEnv): Promise<ProcessorProcess>;
  transactions(payoutId: string): Promise<Array<{ txid: string; status: string; failure_reason: string | null }>>;
  /** Signatures of the payout in signer.audit_log, their txids in order. */
  signatures(payoutId: string): Promise<string[]>;
  dispose(): Promise<void>;
}

export async function startTronWorld(options: { signerEnv?: NodeJS.ProcessEnv } = {}): Promise<TronWorld> {
  const tron = await TronStandIn.start();
  const usdt = freshTronAddress();
  // The serve role reads the Tron treasury's balances (the Treasury page) from the same stand-in.
  const h = await startPayoutHarness({ CHAIN_TRON_API_URL: tron.url, CHAIN_TRON_USDT_CONTRACT: usdt });
  const ca = new TestCertificateAuthority();
  const signer = await startSignerProcess(h, undefined, ca, {
    INVOICE_XPUB_TRX: TEST_TRON_XPUB,
    CHAIN_TRON_USDT_CONTRACT: usdt,
    SIGNER_MAX_PAYOUT_TRX: '100000',
    SIGNER_DAILY_LIMIT_TRX: '1000000',
    ...options.signerEnv,
  });
  const processorCert = ca.issue('payout-processor');
  const signerLink = await new TcpHoldProxy({ host: '127.0.0.1', port: signer.port }).start();
  tron.fund(TEST_TRON_TREASURY, 1_000_000_000_000n);
  tron.fundToken(usdt, TEST_TRON_TREASURY, 1_000_000_000_000n);
  const processors: ProcessorProcess[] = [];
  return {
    tron,
    h,
    signer,
    signerLink,
    usdt,
    async startProcessor(env = {}) {
      const processor = await spawnRole(['process', 'tron'], {
        ...h.svc.env,
        GRPC_PORT: '0',
        ADMIN_PORT: '0',
        LOG_LEVEL: 'info',
        CHAIN_TRON_API_URL: tron.url,
        CHAIN_TRON_USDT_CONTRACT: usdt,
        CHAIN_TRON_CONFIRMATIONS: '1',
        SIGNER_URL: `https://127.0.0.1:${signerLink.port}`,
        TLS_CA_FILE: ca.caFile,
        TLS_CERT_FILE: processorCert.certFile,
        TLS_KEY_FILE: processorCert.keyFile,
        PAYOUT_PROCESSOR_POLL_MS: '100',
        ...env,
      }, /"adminPort":(\d+)/);
      processors.push(processor);
      return processor;
    },
    ...payoutHelpers(h, freshTronAddress),
    transactions(payoutId) {
      return h.sql`select txid, status, failure_reason from tron_transactions where payout_id = ${payoutId} order by id`;
    },
    async signatures(payoutId) {
      const rows = await h.sql<{ txid: string }[]>`select transaction_hash as txid from signer.audit_log where payout_id = ${payoutId} and outcome = 'signed' order by id`;
      return rows.map((r) => r.txid);
    },
    async dispose() {
      for (const p of processors) await p.kill();
      await signerLink.stop();
      await signer.dispose();
      await h.dispose();
      ca.remove();
      await tron.close();
    },
  };
}
