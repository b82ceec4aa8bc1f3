/**
 * The operators' treasury surface (docs/treasury.md): Approve, the sweep-task list,
 * the Treasury page (per network: the treasury address and its balance read from the node, the
 * pause switch, deposits awaiting sweep, payouts in flight, the approval queue) and pause/resume.
 * The processor (`payout process <network>`) owns the rows read here; this is the API role's view.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { errors, eventTransaction, fail, pass, RequestFields, requireValid, checkOptionalOneOf, checkPageSize, checkUuid, type Check, type Logger, type Sql } from '@coinvoice/runtime';
import type { CryptoCurrency } from '@coinvoice/chains/coin';
import { SUPPORTED_CRYPTO } from '@coinvoice/chains/currencies';
import { fetchJson, isRecord } from '@coinvoice/chains/payout-check';
import { formatPlain, fromBaseUnits } from '@coinvoice/domain/money';
import type {
  ApprovePayoutRequest,
  GetTreasuryRequest,
  ListSweepTasksRequest,
  SetTreasuryPausedRequest,
  TreasuryBalanceSchema,
  TreasuryNetworkSchema,
} from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { payoutToProto } from './proto';
import { TronNode } from './processor/tron/node';
import { USDT_TRON } from '@coinvoice/chains/tron/coins';
import { approvePayout, lockPayout } from './store/payouts';
import { availableBalance } from './processor/utxo/store';
import { awaitingApproval, listSweepTasks, payoutsInFlight, pendingSweeps, refusedBySigner, setPaused, treasuryNetworks, type SweepTaskRow, type TreasuryNetworkRow } from './store/treasury';

export const SWEEP_TASK_STATUSES = ['pending', 'sent', 'confirmed', 'skipped_dust'] as const;

/** The networks a processor sends on (`payout process <network>`, docs/treasury.md#processor). */
export const TREASURY_NETWORKS = ['ethereum', 'bitcoin', 'litecoin', 'tron'] as const;
export type TreasuryNetwork = (typeof TREASURY_NETWORKS)[number];

/** Each treasury network's assets: every registry entry carried on it (USDT on tron is Tron's USDT). */
export const TREASURY_ASSETS: Readonly<Record<TreasuryNetwork, readonly CryptoCurrency[]>> = {
  ethereum: SUPPORTED_CRYPTO.filter((c) => c.chain === 'ethereum'),
  bitcoin: SUPPORTED_CRYPTO.filter((c) => c.chain === 'bitcoin'),
  litecoin: SUPPORTED_CRYPTO.filter((c) => c.chain === 'litecoin'),
  // TRX, and USDT as the Tron processor pays it (TRC-20, PAYOUT_AUTO_MAX_USDT): docs/treasury.md#tron.
  tron: [...SUPPORTED_CRYPTO.filter((c) => c.chain === 'tron'), USDT_TRON],
};

function treasuryAssetsOf(network: string): readonly CryptoCurrency[] {
  return (TREASURY_NETWORKS as readonly string[]).includes(network) ? TREASURY_ASSETS[network as TreasuryNetwork] : [];
}

/** Reads the treasury's balance of each asset of a network from its node; undefined when no node is configured. */
export interface TreasuryBalanceReader {
  read(address: string): Promise<MessageInitShape<typeof TreasuryBalanceSchema>[]>;
}

export interface TreasuryDeps {
  sql: Sql;
  logger: Logger;
  /** The operator behind a session token (auth VerifyOperatorToken); throws 401/403. */
  operator(token: string): Promise<string>;
  /** PAYOUT_AUTO_MAX_<ASSET> by currency code: payouts above it wait for an Approve. */
  autoMax: Readonly<Record<string, string>>;
  /** Per network, when its node is configured. */
  balances: Readonly<Record<string, TreasuryBalanceReader | undefined>>;
  /** Why a network has no reader (shown instead of a balance), e.g. "CHAIN_ETHEREUM_RPC_URL is not set". */
  unconfiguredReason: (network: string) => string;
}

/** Opaque to clients: base64url of "s1:<id>", the last sweep task shown. */
const SWEEP_CURSOR_TAG = 's1';

function decodeSweepCursor(raw: unknown): Check<bigint | undefined> {
  if (raw === undefined || raw === '') return pass(undefined);
  if (typeof raw !== 'string' || raw.length > 64 || !/^[A-Za-z0-9_-]+$/.test(raw)) return fail('is not a valid cursor');
  const match = /^s1:(\d{1,19})$/.exec(Buffer.from(raw, 'base64url').toString('utf8'));
  return match ? pass(BigInt(match[1]!)) : fail('is not a valid cursor');
}

function encodeSweepCursor(id: string): string {
  return Buffer.from(`${SWEEP_CURSOR_TAG}:${id}`, 'utf8').toString('base64url');
}

function checkNetwork(raw: unknown): Check<string> {
  return typeof raw === 'string' && /^[a-z][a-z0-9-]{0,31}$/.test(raw) ? pass(raw) : fail('must be a network name such as "ethereum"');
}

/** An asset's base units as a decimal of the asset (unknown assets stay in base units). */
function assetAmount(asset: string, baseUnits: string): string {
  const coin = SUPPORTED_CRYPTO.find((c) => c.code === asset);
  return coin ? formatPlain(fromBaseUnits(BigInt(baseUnits), coin.baseUnitDecimals)) : baseUnits;
}

export class TreasuryHandlers {
  constructor(private readonly deps: TreasuryDeps) {}

  async approvePayout(req: ApprovePayoutRequest) {
    const ref = requireValid(
      (() => {
        const fields = new RequestFields();
        const payoutId = fields.take('payoutId', checkUuid(req.payoutId));
        return fields.result(() => ({ payoutId: payoutId! }));
      })(),
    );
    const operatorId = await this.deps.operator(req.operatorToken);
    const row = await eventTransaction(this.deps.sql, async (tx) => {
      const locked = await lockPayout(tx, ref.payoutId);
      if (!locked) throw errors.notFound('payout');
      const { payout } = locked;
      // A second Approve answers the payout as it is (idempotent), whatever happened since, while it is Pending.
      if (payout.approved_at !== null && payout.status === 'Pending') return { payout, changed: false };
      const approved = await approvePayout(tx, payout.id, operatorId);
      if (!approved) {
        throw errors.conflict('payout_not_pending', 'only a verified live Pending payout that is not being sent can be approved');
      }
      return { payout: approved, changed: true };
    });
    if (row.changed) this.deps.logger.info({ payoutId: row.payout.id, projectId: row.payout.project_id, operatorId }, 'payout approved by an operator');
    return { payout: payoutToProto(row.payout) };
  }

  async listSweepTasks(req: ListSweepTasksRequest) {
    await this.deps.operator(req.operatorToken);
    const fields = new RequestFields();
    const invoiceId = req.invoiceId === undefined ? undefined : fields.take('invoiceId', checkUuid(req.invoiceId));
    const status = fields.take('status', checkOptionalOneOf(req.status, SWEEP_TASK_STATUSES));
    const network = req.network === undefined ? undefined : fields.take('network', checkNetwork(req.network));
    const pageSize = fields.take('pageSize', checkPageSize(req.pageSize));
    const beforeId = fields.take('cursor', decodeSweepCursor(req.cursor));
    const query = requireValid(fields.result(() => ({ invoiceId: invoiceId?.toLowerCase(), status, network, pageSize: pageSize!, beforeId })));
    const page = await listSweepTasks(this.deps.sql, query);
    const last = page.rows[page.rows.length - 1];
    return { sweepTasks: page.rows.map(sweepTaskInit), nextCursor: page.more && last ? encodeSweepCursor(last.id) : '' };
  }

  async getTreasury(req: GetTreasuryRequest) {
    await this.deps.operator(req.operatorToken);
    const recorded = new Map((await treasuryNetworks(this.deps.sql)).map((n) => [n.network, n]));
    const names = [...new Set([...Object.keys(TREASURY_ASSETS), ...recorded.keys()])].sort();
    const sweeps = await pendingSweeps(this.deps.sql);
    const networks = await Promise.all(names.map((name) => this.network(name, recorded.get(name), sweeps)));
    return { networks };
  }

  async setTreasuryPaused(req: SetTreasuryPausedRequest) {
    const fields = new RequestFields();
    const network = fields.take('network', checkNetwork(req.network));
    const { network: name } = requireValid(fields.result(() => ({ network: network! })));
    const operatorId = await this.deps.operator(req.operatorToken);
    const row = await setPaused(this.deps.sql, name, req.paused, operatorId);
    if (!row) throw errors.notFound('treasury network');
    this.deps.logger.warn({ network: name, operatorId, paused: req.paused }, req.paused ? 'treasury paused by an operator: no new transfers' : 'treasury resumed by an operator');
    return { network: await this.network(name, row, await pendingSweeps(this.deps.sql)) };
  }

  private async network(
    name: string,
    recorded: TreasuryNetworkRow | undefined,
    sweeps: { network: string; asset: string; count: number; amount: string }[],
  ): Promise<MessageInitShape<typeof TreasuryNetworkSchema>> {
    const assets = treasuryAssetsOf(name);
    const codes = assets.map((c) => c.code);
    const [inFlight, refused, queues, balances] = await Promise.all([
      payoutsInFlight(this.deps.sql, name, codes),
      refusedBySigner(this.deps.sql, name),
      Promise.all(codes.map((code) => awaitingApproval(this.deps.sql, name, code, this.deps.autoMax[code] ?? '0'))),
      this.balances(name, recorded?.address, codes),
    ]);
    const approvalQueue = queues.flat().sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || a.id.localeCompare(b.id));
    return {
      network: name,
      ...(recorded ? { address: recorded.address } : {}),
      paused: recorded?.paused ?? false,
      ...(recorded?.paused_by ? { pausedBy: recorded.paused_by } : {}),
      balances,
      pendingSweeps: sweeps.filter((s) => s.network === name).map((s) => ({ asset: s.asset, count: BigInt(s.count), amount: assetAmount(s.asset, s.amount) })),
      inFlight: inFlight.map(payoutToProto),
      approvalQueue: approvalQueue.map(payoutToProto),
      refusedBySigner: refused.map(payoutToProto),
    };
  }

  private async balances(network: string, address: string | undefined, codes: string[]): Promise<MessageInitShape<typeof TreasuryBalanceSchema>[]> {
    const unavailable = (reason: string) => codes.map((asset) => ({ asset, unavailableReason: reason }));
    const reader = this.deps.balances[network];
    if (!reader) return unavailable(this.deps.unconfiguredReason(network));
    if (address === undefined) return unavailable('no treasury address recorded yet: the network’s processor has not run');
    try {
      return await reader.read(address);
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.deps.logger.warn({ network, error: reason }, 'treasury balance could not be read from the node');
      return unavailable(`the node could not be asked: ${reason}`);
    }
  }
}

function sweepTaskInit(row: SweepTaskRow) {
  return {
    id: row.id,
    paymentId: row.payment_id,
    invoiceId: row.invoice_id,
    projectId: row.project_id,
    network: row.network,
    asset: row.asset,
    depositAddress: row.deposit_address,
    amount: assetAmount(row.asset, row.amount),
    status: row.status,
    ...(row.skip_reason === null ? {} : { skipReason: row.skip_reason }),
    ...(row.transaction_hash === null ? {} : { transactionHash: row.transaction_hash }),
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
  };
}

/** balanceOf(address) selector. */
const BALANCE_OF = '0x70a08231';

/** The Ethereum treasury's ETH (eth_getBalance) and token (balanceOf) balances, plain JSON-RPC. */
export class EthereumTreasuryBalances implements TreasuryBalanceReader {
  private nextId = 1;

  constructor(private readonly settings: { rpcUrl: string; timeoutMs: number; contracts: Readonly<Record<string, string>> }) {}

  async read(address: string) {
    return Promise.all(
      TREASURY_ASSETS.ethereum.map(async (coin) => {
        const contract = coin.token ? this.settings.contracts[coin.code] : undefined;
        if (coin.token && !contract) return { asset: coin.code, unavailableReason: `no ${coin.code} contract configured` };
        const raw = contract
          ? await this.call('eth_call', [{ to: contract, data: BALANCE_OF + address.slice(2).toLowerCase().padStart(64, '0') }, 'latest'])
          : await this.call('eth_getBalance', [address, 'latest']);
        if (!/^0x[0-9a-fA-F]*$/.test(raw)) throw new Error(`malformed ${coin.code} balance ${JSON.stringify(raw).slice(0, 80)}`);
        return { asset: coin.code, amount: formatPlain(fromBaseUnits(BigInt(raw === '0x' ? '0x0' : raw), coin.baseUnitDecimals)) };
      }),
    );
  }

  private async call(method: string, params: unknown[]): Promise<string> {
    const body = await fetchJson(this.settings.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: this.nextId++, method, params }),
      timeoutMs: this.settings.timeoutMs,
    });
    if (!isRecord(body) || typeof body.result !== 'string') {
      const message = isRecord(body) && isRecord(body.error) && typeof body.error.message === 'string' ? body.error.message : 'malformed JSON-RPC answer';
      throw new Error(`${method}: ${message}`);
    }
    return body.result;
  }
}


/**
 * The Tron treasury's balances (docs/treasury.md#tron): TRX from /wallet/getaccount, each TRC-20
 * token by a constant balanceOf call, through the processor's own node client.
 */
export class TronTreasuryBalances implements TreasuryBalanceReader {
  private readonly node: TronNode;

  constructor(private readonly settings: { apiUrl: string; timeoutMs: number; contracts: Readonly<Record<string, string>> }) {
    this.node = new TronNode({ url: settings.apiUrl, timeoutMs: settings.timeoutMs });
  }

  async read(address: string) {
    return Promise.all(
      TREASURY_ASSETS.tron.map(async (coin) => {
        const contract = coin.token ? this.settings.contracts[coin.code] : undefined;
        if (coin.token && !contract) return { asset: coin.code, unavailableReason: `no ${coin.code} contract configured on tron` };
        const amount = contract ? await this.node.tokenBalance(contract, address) : await this.node.balance(address);
        return { asset: coin.code, amount: formatPlain(fromBaseUnits(amount, coin.baseUnitDecimals)) };
      }),
    );
  }
}

/**
 * A UTXO treasury's balance (docs/treasury.md#utxo): the sum of its available coins — accounted
 * deposits and confirmed change that no stored transaction spends — as the processor records them.
 * What is reserved by a batch in flight is no longer counted.
 */
export class UtxoTreasuryBalances implements TreasuryBalanceReader {
  constructor(
    private readonly sql: Sql,
    private readonly network: 'bitcoin' | 'litecoin',
  ) {}

  async read() {
    const [coin] = TREASURY_ASSETS[this.network];
    if (!coin) throw new Error(`no asset on ${this.network}`);
    const total = await availableBalance(this.sql, this.network);
    return [{ asset: coin.code, amount: formatPlain(fromBaseUnits(total, coin.baseUnitDecimals)) }];
  }
}
