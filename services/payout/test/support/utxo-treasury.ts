/**
 * The world of the Bitcoin and Litecoin treasury tests (docs/treasury.md#utxo): the Esplora
 * stand-in (services/invoice/test/support/esplora-stand-in.ts — a protocol stand-in serving real
 * signed transactions, NOT a node) behind an HTTP proxy a test can make hold `POST /tx`, the payout
 * service (serve role, in-process, fresh database), the real signer (`main.js sign`, the test seed
 * of ./signer, mutual TLS) behind a TCP proxy that can hold its answers, the invoice service's
 * accounted deposits, and the built processor (`main.js process bitcoin|litecoin`), every process
 * a child killed with SIGKILL. The Ethereum world's pieces are reused (./treasury).
 */
import { randomUUID } from 'node:crypto';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { HDKey } from '@scure/bip32';
import { mnemonicToSeedSync } from '@scure/bip39';
import * as bitcoin from 'bitcoinjs-lib';
import { ECPairFactory } from 'ecpair';
import * as ecc from '@bitcoinerlab/secp256k1';
import { EsploraStandIn, LITECOIN, type StandInTx } from '../../../invoice/test/support/esplora-stand-in';
import { TestCertificateAuthority } from '../../../../test/support/certificates';
import { TcpHoldProxy } from '../../../../test/support/tcp-hold-proxy';
import { startPayoutHarness, waitFor, type Harness } from './harness';
import { TEST_MNEMONIC } from './signer';
import { InvoiceDepositsStandIn, payoutHelpers, spawnRole, startSignerProcess, type PayoutHelpers, type ProcessorProcess, type SignerProcess } from './treasury';

const ECPair = ECPairFactory(ecc);

export type UtxoNetwork = 'bitcoin' | 'litecoin';

const COIN = { bitcoin: { asset: 'BTC', path: "m/84'/0'/0'", network: bitcoin.networks.bitcoin }, litecoin: { asset: 'LTC', path: "m/84'/2'/0'", network: LITECOIN } } as const;

const seed = mnemonicToSeedSync(TEST_MNEMONIC);

/** The test seed's BIP84 account key of a network (what the invoice service's INVOICE_XPUB_<COIN> is). */
export function accountKey(network: UtxoNetwork): HDKey {
  return HDKey.fromMasterSeed(seed).derive(COIN[network].path);
}

/** The P2WPKH address of account/branch/index of the test seed. */
export function accountAddress(network: UtxoNetwork, branch: 0 | 1, index: number): string {
  const key = accountKey(network).deriveChild(branch).deriveChild(index);
  return bitcoin.payments.p2wpkh({ pubkey: Buffer.from(key.publicKey!), network: COIN[network].network }).address!;
}

/** A fresh P2WPKH address of nobody we know (a payout's destination). */
export function freshUtxoAddress(network: UtxoNetwork): string {
  return bitcoin.payments.p2wpkh({ pubkey: Buffer.from(ECPair.makeRandom().publicKey), network: COIN[network].network }).address!;
}

/** satoshi as a decimal of the coin ("0.00125"). */
export function coinAmount(sat: bigint): string {
  const whole = sat / 100_000_000n;
  const fraction = (sat % 100_000_000n).toString().padStart(8, '0').replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole.toString();
}

export type PostTxFault = 'none' | 'hold' | 'forward_no_answer';

/**
 * An HTTP proxy in front of the Esplora stand-in: `POST /tx` can be held (never forwarded: the
 * processor waits for an answer that never comes) or forwarded with its answer never delivered.
 */
export class EsploraFaultProxy {
  postTxFault: PostTxFault = 'none';
  /** POST /tx bodies held or forwarded without answer. */
  readonly heldPosts: string[] = [];
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  url = '';

  constructor(private readonly target: string) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => this.handle(req, res));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const isPostTx = req.method === 'POST' && req.url === '/tx';
      const fault = isPostTx ? this.postTxFault : 'none';
      if (fault === 'hold') {
        this.heldPosts.push(body.toString('utf8'));
        return; // never answered
      }
      const upstream = request(`${this.target}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
        const parts: Buffer[] = [];
        answer.on('data', (c: Buffer) => parts.push(c));
        answer.on('end', () => {
          if (fault === 'forward_no_answer') {
            this.heldPosts.push(body.toString('utf8'));
            return;
          }
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          res.end(Buffer.concat(parts));
        });
      });
      upstream.on('error', () => {
        res.writeHead(502);
        res.end();
      });
      upstream.end(body);
    });
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

export interface UtxoTreasuryWorld extends PayoutHelpers {
  network: UtxoNetwork;
  asset: 'BTC' | 'LTC';
  esplora: EsploraStandIn;
  esploraProxy: EsploraFaultProxy;
  h: Harness;
  signer: SignerProcess;
  signerLink: TcpHoldProxy;
  invoice: InvoiceDepositsStandIn;
  processors: ProcessorProcess[];
  startProcessor(env?: NodeJS.ProcessEnv): Promise<ProcessorProcess>;
  /** A customer's payment of `sat` to deposit address account/0/`index`, mined and reported accounted. */
  deposit(sat: bigint, index?: number): Promise<{ txid: string; vout: number; sat: bigint; index: number }>;
  /** The batch transactions the processor stored, oldest first. */
  versions(): Promise<VersionView[]>;
  /** A transaction the stand-in knows (mined or in its mempool). */
  transaction(txid: string): StandInTx | undefined;
  /** Mined transactions that pay `address`. */
  minedPaying(address: string): StandInTx[];
  /**
   * A transaction the processor did not make (an operator's transfer with the seed) spending the
   * deposit output of account/0/`index`, mined in a new block.
   */
  spendElsewhere(deposit: { txid: string; vout: number; sat: bigint; index: number }): StandInTx;
  dispose(): Promise<void>;
}

export interface VersionView {
  id: string;
  batch_id: string;
  status: string;
  txid: string | null;
  fee: string;
  fee_rate: string;
  change_amount: string | null;
  change_output_index: number | null;
  replaces: string | null;
  psbt: string;
  vsize: number | null;
}

export async function startUtxoTreasuryWorld(network: UtxoNetwork, options: { processorEnv?: NodeJS.ProcessEnv; signerEnv?: NodeJS.ProcessEnv } = {}): Promise<UtxoTreasuryWorld> {
  const { asset } = COIN[network];
  const esplora = await EsploraStandIn.start(COIN[network].network);
  const esploraProxy = await new EsploraFaultProxy(esplora.url).start();
  const h = await startPayoutHarness();
  const ca = new TestCertificateAuthority();
  const xpubs = { INVOICE_XPUB_BTC: accountKey('bitcoin').publicExtendedKey, INVOICE_XPUB_LTC: accountKey('litecoin').publicExtendedKey };
  const signer = await startSignerProcess(h, undefined, ca, {
    ...xpubs,
    [`SIGNER_MAX_PAYOUT_${asset}`]: '10',
    [`SIGNER_DAILY_LIMIT_${asset}`]: '1000',
    ...options.signerEnv,
  });
  const processorCert = ca.issue('payout-processor');
  const invoice = await new InvoiceDepositsStandIn(ca.issue('invoice')).start();
  const signerLink = await new TcpHoldProxy({ host: '127.0.0.1', port: signer.port }).start();
  const processors: ProcessorProcess[] = [];
  let nextIndex = 1;
  let nextRow = 1n;
  const upper = network.toUpperCase();

  const world: UtxoTreasuryWorld = {
    network,
    asset,
    esplora,
    esploraProxy,
    h,
    signer,
    signerLink,
    invoice,
    processors,
    ...payoutHelpers(h, () => freshUtxoAddress(network)),
    async startProcessor(env = {}) {
      const processor = await spawnRole(['process', network], {
        ...h.svc.env,
        GRPC_PORT: '0',
        ADMIN_PORT: '0',
        LOG_LEVEL: 'info',
        [`CHAIN_${upper}_ESPLORA_URL`]: esploraProxy.url,
        [`CHAIN_${upper}_CONFIRMATIONS`]: '2',
        CHAIN_SOURCE_TIMEOUT_MS: '3000',
        SIGNER_URL: `https://127.0.0.1:${signerLink.port}`,
        INVOICE_URL: invoice.url,
        TLS_CA_FILE: ca.caFile,
        TLS_CERT_FILE: processorCert.certFile,
        TLS_KEY_FILE: processorCert.keyFile,
        PAYOUT_PROCESSOR_POLL_MS: '200',
        PAYOUT_BATCH_WAIT: '1s',
        ...options.processorEnv,
        ...env,
      }, /"adminPort":(\d+)/);
      processors.push(processor);
      return processor;
    },
    async deposit(sat, index = nextIndex++) {
      const address = accountAddress(network, 0, index);
      const payer = esplora.fundedPayer(Number(sat) + 5_000, 1);
      const tx = esplora.pay(payer, [{ address, value: Number(sat) }]);
      esplora.broadcast(tx);
      esplora.mine([tx]);
      invoice.deposits.push({
        paymentId: `${network}:${tx.txid}:0`,
        invoiceId: randomUUID(),
        projectId: randomUUID(),
        chain: network,
        address,
        addressIndex: index,
        asset,
        amount: coinAmount(sat),
        reportedAt: timestampFromDate(new Date()),
        rowId: nextRow++,
      });
      return { txid: tx.txid, vout: 0, sat, index };
    },
    versions() {
      return h.sql<VersionView[]>`select id::text, batch_id::text, status, txid, fee::text, fee_rate::text, change_amount::text, change_output_index, replaces::text, psbt, vsize from utxo_transactions order by utxo_transactions.id`; // the number, not the text column id
    },
    transaction(txid) {
      return [...esplora.blocks.flatMap((b) => b.txs), ...esplora.mempool.values()].find((t) => t.txid === txid);
    },
    minedPaying(address) {
      const script = bitcoin.address.toOutputScript(address, COIN[network].network);
      return esplora.blocks.flatMap((b) => b.txs).filter((t) => t.tx.outs.some((o) => Buffer.from(o.script).equals(script)));
    },
    spendElsewhere(deposit) {
      const key = accountKey(network).deriveChild(0).deriveChild(deposit.index);
      const script = bitcoin.payments.p2wpkh({ pubkey: Buffer.from(key.publicKey!), network: COIN[network].network }).output!;
      const psbt = new bitcoin.Psbt({ network: COIN[network].network });
      psbt.addInput({ hash: deposit.txid, index: deposit.vout, witnessUtxo: { script, value: deposit.sat } });
      psbt.addOutput({ script: bitcoin.address.toOutputScript(freshUtxoAddress(network), COIN[network].network), value: deposit.sat - 10_000n });
      psbt.signInput(0, ECPair.fromPrivateKey(Buffer.from(key.privateKey!), { network: COIN[network].network }));
      psbt.finalizeAllInputs();
      const tx = psbt.extractTransaction();
      const spend: StandInTx = { txid: tx.getId(), hex: tx.toHex(), tx, prevouts: [{ txid: deposit.txid, vout: deposit.vout, script: Buffer.from(script), value: Number(deposit.sat) }] };
      esplora.mine([spend]);
      return spend;
    },
    async dispose() {
      for (const p of processors) await p.kill();
      await signerLink.stop();
      await signer.dispose();
      await invoice.stop();
      await h.dispose();
      ca.remove();
      await esploraProxy.stop();
      await esplora.close();
    },
  };
  return world;
}

/** Waits until the processor has stored a version and the stand-in's mempool holds it; answers its txid. */
export async function waitForBroadcast(world: UtxoTreasuryWorld, timeoutMs = 20_000): Promise<string> {
  return waitFor('a batch transaction in the mempool', async () => {
    const versions = await world.versions();
    return versions.map((v) => v.txid).find((txid) => txid !== null && world.esplora.mempool.has(txid)) ?? undefined;
  }, timeoutMs);
}

/** What a mined transaction pays each address, in base units (outputs to one address added). */
export function outputsOf(network: UtxoNetwork, tx: StandInTx): Map<string, bigint> {
  const paid = new Map<string, bigint>();
  for (const out of tx.tx.outs) {
    const address = bitcoin.address.fromOutputScript(Buffer.from(out.script), COIN[network].network);
    paid.set(address, (paid.get(address) ?? 0n) + BigInt(out.value));
  }
  return paid;
}

/**
 * Sets what the stand-in's `GET /fee-estimates` answers (confirmation target → sat/vB, decimals as
 * Esplora gives them).
 */
export function setFeeEstimates(world: UtxoTreasuryWorld, estimates: Record<number, number>): void {
  world.esplora.setFeeEstimates(Object.fromEntries(Object.entries(estimates).map(([target, rate]) => [String(target), rate])));
}
