/**
 * The world of the treasury tests (docs/treasury.md): a real anvil with the test tokens, the payout
 * service (serve role, in-process, fresh database) to create payouts through its own handlers, the
 * real signer (`node services/payout/dist/main.js sign`, the test seed of ./signer, mutual TLS
 * with a test CA), JSON-RPC and TCP proxies a test can make misbehave, and the built processor
 * (`node services/payout/dist/main.js process ethereum`) — every process a child, killed with SIGKILL.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { InvoiceService, type AccountedDepositSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import path from 'node:path';
import { parseAbiItem, parseEther, type Address, type Hash } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { compileTestContracts, deployTokens, mined, sendEth, sendToken, startAnvil, tokenUnits, type Anvil, type Tokens } from '../../../../test/support/anvil';
import { RpcFaultProxy } from '../../../../test/support/rpc-fault-proxy';
import { TestCertificateAuthority } from '../../../../test/support/certificates';
import { freePortForTest } from '../../../../test/support/ports';
import { TcpHoldProxy } from '../../../../test/support/tcp-hold-proxy';
import type { CryptoCode } from '@coinvoice/chains/coin';
import { codeOf, payoutRequest, startPayoutHarness, waitFor, type Harness } from './harness';
import { depositAddressOf, TEST_ACCOUNT_XPUB, TEST_TREASURY, writeSeedFile } from './signer';

const REPO_ROOT = path.resolve(__dirname, '../../../..');
const PROCESSOR_MAIN = path.join(REPO_ROOT, 'services/payout/dist/main.js');

export type Asset = 'ETH' | 'USDT' | 'USDC';

export interface ProcessorProcess {
  child: ChildProcess;
  /** Every line it wrote (stdout and stderr). */
  logs: string[];
  adminUrl: string;
  /** SIGKILL, and wait until it is gone. */
  kill(): Promise<void>;
}

/** The signer process (`main.js sign`) on a fixed port, so a restarted one is found at the same address. */
export interface SignerProcess {
  current: ProcessorProcess;
  port: number;
  /** SIGKILLs the running signer. */
  kill(): Promise<void>;
  /** Kills it and removes its seed file. */
  dispose(): Promise<void>;
  /** Starts it again (after a kill). */
  restart(): Promise<void>;
  /** Every signer process's log lines. */
  logs(): string[];
  /** Signatures of a payout in signer.audit_log: their nonces, in order. */
  payoutSignatures(payoutId: string): Promise<number[]>;
}

export interface TreasuryWorld extends PayoutHelpers<Address> {
  anvil: Anvil;
  tokens: Tokens;
  h: Harness;
  signer: SignerProcess;
  /** Between the processors and anvil. */
  rpc: RpcFaultProxy;
  /** The invoice service's ListAccountedDeposits, as the sweep intake reads it. */
  invoice: InvoiceDepositsStandIn;
  /** Between the processors and the signer. */
  signerLink: TcpHoldProxy;
  treasury: Address;
  /** Every processor started, for the log checks. */
  processors: ProcessorProcess[];
  startProcessor(env?: NodeJS.ProcessEnv): Promise<ProcessorProcess>;
  chainTransactions(payoutId: string): Promise<ChainTransactionView[]>;
  /** Token Transfer logs to `address` of `asset`'s contract. */
  transfersTo(asset: 'USDT' | 'USDC', address: Address): Promise<Array<{ value: bigint; transactionHash: Hash }>>;
  dispose(): Promise<void>;
}

export interface PayoutView {
  id: string;
  status: string;
  amount: string;
  currency: string;
  network: string;
  transaction_hash: string | null;
  confirmations: number | null;
  claimed_by: string | null;
  admin_note: string | null;
  approved_at: Date | null;
  completed_at: Date | null;
  project_id: string;
}

export interface ChainTransactionView {
  id: string;
  purpose: string;
  status: string;
  nonce: string;
  transaction_hash: string;
  replaces: string | null;
  amount: string;
  gas_used: string | null;
  from_address: string;
  to_address: string;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
  failure_reason: string | null;
}

const TRANSFER = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)');

export const freshAddress = (): Address => privateKeyToAccount(generatePrivateKey()).address;

/** A deposit address (account/0/index) as the invoice service would have given it. */
export const depositAddress = (index: number): Address => depositAddressOf(index);

export async function startTreasuryWorld(options: { processorEnv?: NodeJS.ProcessEnv; signerEnv?: NodeJS.ProcessEnv } = {}): Promise<TreasuryWorld> {
  const anvil = await startAnvil();
  const tokens = await deployTokens(anvil);
  const h = await startPayoutHarness();
  const ca = new TestCertificateAuthority();
  const signer = await startSignerProcess(h, tokens, ca, options.signerEnv);
  const processorCert = ca.issue('payout-processor');
  const invoice = await new InvoiceDepositsStandIn(ca.issue('invoice')).start();
  const rpc = await new RpcFaultProxy(anvil.url).start();
  const signerLink = await new TcpHoldProxy({ host: '127.0.0.1', port: signer.port }).start();
  const treasury = TEST_TREASURY;
  await sendEth(anvil, treasury, '1000');
  await sendToken(anvil, tokens.usdt, treasury, '100000');
  await sendToken(anvil, tokens.usdc, treasury, '100000');
  const processors: ProcessorProcess[] = [];

  const world: TreasuryWorld = {
    anvil,
    tokens,
    h,
    signer,
    invoice,
    rpc,
    signerLink,
    treasury,
    processors,
    async startProcessor(env = {}) {
      const processor = await spawnProcessor({
        ...h.svc.env,
        GRPC_PORT: '0',
        ADMIN_PORT: '0',
        LOG_LEVEL: 'info',
        CHAIN_ETHEREUM_RPC_URL: rpc.url,
        CHAIN_ETHEREUM_RPC_TIMEOUT_MS: '3000',
        CHAIN_ETHEREUM_USDT_CONTRACT: tokens.usdt,
        CHAIN_ETHEREUM_USDC_CONTRACT: tokens.usdc,
        CHAIN_ETHEREUM_CONFIRMATIONS: '1',
        SIGNER_URL: `https://127.0.0.1:${signerLink.port}`,
        INVOICE_URL: invoice.url,
        TLS_CA_FILE: ca.caFile,
        TLS_CERT_FILE: processorCert.certFile,
        TLS_KEY_FILE: processorCert.keyFile,
        PAYOUT_PROCESSOR_POLL_MS: '200',
        ...options.processorEnv,
        ...env,
      });
      processors.push(processor);
      return processor;
    },
    ...payoutHelpers(h, freshAddress),
    chainTransactions(payoutId) {
      return h.sql<ChainTransactionView[]>`select * from chain_transactions where payout_id = ${payoutId} order by id`;
    },
    async transfersTo(asset, address) {
      const logs = await anvil.publicClient.getLogs({ address: asset === 'USDT' ? tokens.usdt : tokens.usdc, event: TRANSFER, args: { to: address }, fromBlock: 0n });
      return logs.map((log) => ({ value: log.args.value!, transactionHash: log.transactionHash! }));
    },
    async dispose() {
      for (const p of processors) await p.kill();
      await signerLink.stop();
      await rpc.stop();
      await signer.dispose();
      await invoice.stop();
      await h.dispose();
      ca.remove();
      await anvil.stop();
    },
  };
  return world;
}

/** What every treasury world does with payouts through the payout service's own handlers and tables. */
export interface PayoutHelpers<A extends string = string> {
  /** A verified live payout (credited first) on `network` (default: the currency's default network), approved unless told otherwise. */
  payout(currency: CryptoCode, amount: string, options?: { approve?: boolean; address?: A; network?: string }): Promise<{ id: string; address: A; projectId: string }>;
  approve(payoutId: string): Promise<void>;
  payoutRow(payoutId: string): Promise<PayoutView>;
  waitForStatus(payoutId: string, status: string, timeoutMs?: number): Promise<PayoutView>;
  /** payout.completed / payout.rejected events written for the payout (the outbox). */
  events(payoutId: string, type: string): Promise<number>;
}

export function payoutHelpers<A extends string>(h: Harness, freshPayoutAddress: () => A): PayoutHelpers<A> {
  const helpers: PayoutHelpers<A> = {
    async payout(currency, amount, opts = {}) {
      const project = h.auth.addProject('live');
      await h.credit(project, currency, '1000000', undefined, opts.network);
      const address = opts.address ?? freshPayoutAddress();
      const { payout } = await h.client.requestPayout(payoutRequest(project, { currency, amount, address, ...(opts.network ? { network: opts.network } : {}) }));
      await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
      if (opts.approve ?? true) await helpers.approve(payout!.id);
      return { id: payout!.id, address, projectId: project.id };
    },
    async approve(payoutId) {
      // What the operators' Approve does (payouts.approved_at / approved_by, 0200_treasury.sql).
      await h.sql`update payouts set approved_at = now(), approved_by = 'test-operator' where id = ${payoutId}`;
    },
    async payoutRow(payoutId) {
      const [row] = await h.sql<PayoutView[]>`select * from payouts where id = ${payoutId}`;
      if (!row) throw new Error(`no payout ${payoutId}`);
      return row;
    },
    async waitForStatus(payoutId, status, timeoutMs = 30_000) {
      return waitFor(`payout ${payoutId} ${status}`, async () => {
        const row = await helpers.payoutRow(payoutId);
        return row.status === status ? row : undefined;
      }, timeoutMs);
    },
    async events(payoutId, type) {
      const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from outbox where event_key = ${payoutId} and event_type = ${type}`;
      return row?.n ?? 0;
    },
  };
  return helpers;
}

type AccountedDeposit = MessageInitShape<typeof AccountedDepositSchema>;

/**
 * A stand-in for the invoice service's ListAccountedDeposits (the record of accounted deposits the
 * sweep intake pages through), over TLS with the test CA's `invoice` certificate, answering from
 * deposits the test adds, in (reported at, row id) order after the request's keyset.
 */
export class InvoiceDepositsStandIn {
  readonly deposits: AccountedDeposit[] = [];
  private server: http2.Http2SecureServer | undefined;
  url = '';

  constructor(private readonly cert: { cert: Buffer; key: Buffer }) {}

  async start(): Promise<this> {
    const handler = connectNodeAdapter({
      routes: (router) => {
        router.rpc(InvoiceService.method.listAccountedDeposits, async (req) => {
          const after = req.afterReportedAt ? { at: timestampDate(req.afterReportedAt).getTime(), row: req.afterRowId } : undefined;
          const position = (d: AccountedDeposit) => ({ at: d.reportedAt ? timestampDate(d.reportedAt as Parameters<typeof timestampDate>[0]).getTime() : 0, row: BigInt(d.rowId ?? 0) });
          const deposits = this.deposits
            .filter((d) => d.chain === req.chain)
            .filter((d) => !after || position(d).at > after.at || (position(d).at === after.at && position(d).row > after.row))
            .sort((a, b) => position(a).at - position(b).at || Number(position(a).row - position(b).row))
            .slice(0, req.pageSize || 500);
          return { deposits };
        });
      },
    });
    this.server = http2.createSecureServer({ cert: this.cert.cert, key: this.cert.key }, handler);
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `https://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/**
 * The real signer on the world's database (it reads payout.payouts), its schema migrated by
 * `main.js sign migrate`; the test seed; limits raised above the tests' amounts; mutual TLS.
 */
export async function startSignerProcess(h: Harness, tokens: Tokens | undefined, ca: TestCertificateAuthority, extraEnv: NodeJS.ProcessEnv = {}): Promise<SignerProcess> {
  const seed = writeSeedFile();
  const cert = ca.issue('payout-signer');
  const port = await freePortForTest();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    APP_ENV: 'development',
    DATABASE_URL: h.svc.database.url,
    LOG_LEVEL: 'info',
    GRPC_PORT: String(port),
    ADMIN_PORT: '0',
    SIGNER_SEED_FILE: seed.file,
    INVOICE_XPUB_ETH: TEST_ACCOUNT_XPUB,
    CHAIN_ETHEREUM_CHAIN_ID: '31337',
    ...(tokens ? { CHAIN_ETHEREUM_USDT_CONTRACT: tokens.usdt, CHAIN_ETHEREUM_USDC_CONTRACT: tokens.usdc } : {}),
    TLS_CA_FILE: ca.caFile,
    TLS_CERT_FILE: cert.certFile,
    TLS_KEY_FILE: cert.keyFile,
    SIGNER_MAX_PAYOUT_ETH: '1000',
    SIGNER_DAILY_LIMIT_ETH: '100000',
    SIGNER_MAX_PAYOUT_USDT: '1000000',
    SIGNER_DAILY_LIMIT_USDT: '100000000',
    SIGNER_MAX_PAYOUT_USDC: '1000000',
    SIGNER_DAILY_LIMIT_USDC: '100000000',
    ...extraEnv,
  };
  const migrated = spawnSync(process.execPath, [PROCESSOR_MAIN, 'sign', 'migrate'], { env, encoding: 'utf8', timeout: 30_000 });
  if (migrated.status !== 0) throw new Error(`sign migrate failed: ${migrated.stderr}`);
  const all: ProcessorProcess[] = [];
  const start = async () => {
    const started = await spawnRole(['sign'], env, /"adminPort":(\d+)/);
    all.push(started);
    return started;
  };
  const signer: SignerProcess = {
    current: await start(),
    port,
    async kill() {
      await signer.current.kill();
    },
    async dispose() {
      await signer.current.kill();
      seed.remove();
    },
    async restart() {
      signer.current = await start();
    },
    logs: () => all.flatMap((p) => p.logs),
    async payoutSignatures(payoutId) {
      const rows = await h.sql<{ nonce: string }[]>`select nonce::text from signer.audit_log where payout_id = ${payoutId} and outcome = 'signed' order by id`;
      return rows.map((r) => Number(r.nonce));
    },
  };
  return signer;
}

async function spawnProcessor(env: NodeJS.ProcessEnv): Promise<ProcessorProcess> {
  return spawnRole(['process', 'ethereum'], env, /"adminPort":(\d+)/);
}

export async function spawnRole(args: string[], env: NodeJS.ProcessEnv, adminPortLine: RegExp): Promise<ProcessorProcess> {
  const child = spawn(process.execPath, [PROCESSOR_MAIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: string[] = [];
  let adminPort: number | undefined;
  const onData = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line === '') continue;
      logs.push(line);
      const match = adminPortLine.exec(line);
      if (match) adminPort = Number(match[1]);
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGKILL');
    await exited;
  };
  try {
    await waitFor(`${args.join(' ')} to serve`, async () => {
      if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited (${child.exitCode}):\n${logs.join('\n')}`);
      return adminPort !== undefined;
    }, 30_000);
  } catch (err) {
    await kill();
    throw err;
  }
  return { child, logs, adminUrl: `http://127.0.0.1:${adminPort}`, kill };
}

/** Waits until a processor's logs say it holds the network's lock. */
export async function activeProcessor(processor: ProcessorProcess, timeoutMs = 20_000): Promise<void> {
  await waitFor('the processor to become active', async () => processor.logs.some((line) => line.includes('advisory lock taken')), timeoutMs);
}

/** A test's own funding of a deposit address (what a customer's payment does). */
export async function fundDeposit(world: TreasuryWorld, asset: Asset, address: Address, amount: string): Promise<void> {
  if (asset === 'ETH') await sendEth(world.anvil, address, amount);
  else await sendToken(world.anvil, asset === 'USDT' ? world.tokens.usdt : world.tokens.usdc, address, amount);
}

/** A sweep task row as the integrator's intake inserts it for an accounted deposit. */
export async function insertSweepTask(world: TreasuryWorld, task: { asset: Asset; index: number; amount: bigint }): Promise<string> {
  const [row] = await world.h.sql<{ id: string }[]>`
    insert into sweep_tasks (payment_id, invoice_id, project_id, network, asset, deposit_address, address_index, amount)
    values (${`ethereum:0x${crypto.randomUUID().replace(/-/g, '')}:${task.index}`}, ${crypto.randomUUID()}, ${crypto.randomUUID()}, 'ethereum', ${task.asset},
            ${depositAddress(task.index)}, ${task.index}, ${task.amount.toString()}::numeric)
    returning id::text`;
  return row!.id;
}

/** Mines `blocks` blocks. */
export async function mineBlocks(world: TreasuryWorld, blocks: number): Promise<void> {
  await world.anvil.testClient.mine({ blocks });
}

export async function setBlacklisted(world: TreasuryWorld, token: Address, address: Address): Promise<void> {
  await mined(world.anvil, await world.anvil.wallet.writeContract({ address: token, abi: compileTestContracts().TestToken.abi, functionName: 'setBlacklisted', args: [address, true] }));
}

/** The text of /metrics on a processor's admin port. */
export async function metricsOf(processor: ProcessorProcess): Promise<string> {
  return (await fetch(`${processor.adminUrl}/metrics`)).text();
}

export { parseEther, tokenUnits };
