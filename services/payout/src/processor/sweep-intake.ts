/**
 * The sweep intake (docs/treasury.md#sweep-tasks): one sweep task per accounted live deposit. The
 * invoice service is the record of deposits (ListAccountedDeposits); this pages through a chain's
 * deposits after the stored cursor and inserts a task for each payment id, once.
 *
 * Deposits are reported in transactions that may commit out of order, so a page starting at the
 * cursor could miss a row committed late with an earlier reported_at: each round re-reads an
 * overlap before the cursor, and the payment id's unique index makes re-reading harmless.
 */
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { Logger, Sql } from '@coinvoice/runtime';
import type { ListAccountedDepositsRequest, ListAccountedDepositsResponse } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ListAccountedDepositsRequestSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { findCryptoCurrency, isPayNetwork, payMethod } from '@coinvoice/chains/currencies';
import { parsePositiveDecimal, toBaseUnits } from '@coinvoice/domain/money';
import { isUuid } from '@coinvoice/runtime';

export interface SweepIntakeDeps {
  sql: Sql;
  /** The invoice service's ListAccountedDeposits. */
  listDeposits: (request: MessageInitShape<typeof ListAccountedDepositsRequestSchema>) => Promise<ListAccountedDepositsResponse>;
  /** The network whose processor sweeps, and the chain its deposits are on. */
  network: string;
  chain: string;
  /** Assets this network's treasury sweeps (e.g. ETH, USDT, USDC on ethereum). */
  assets: ReadonlySet<string>;
  logger: Logger;
  /** How far before the cursor each round re-reads (default 2 min). */
  overlapMs?: number;
  pageSize?: number;
  /**
   * Records one deposit of this network; answers 1 when it is new, 0 when known (a re-read).
   * Default: a sweep task (EVM). UTXO networks record a spendable coin instead (docs/treasury.md#utxo).
   */
  record?: (deposit: SweepTaskCandidate) => Promise<number>;
}

export interface SweepTaskCandidate {
  paymentId: string;
  invoiceId: string;
  projectId: string;
  asset: string;
  depositAddress: string;
  addressIndex: number;
  /** Base units. */
  amount: bigint;
}

type Deposit = ListAccountedDepositsResponse['deposits'][number];

/**
 * A deposit as a sweep task of this network, or why it is not one: only deposits on this network
 * (a USDT deposit on bsc is not swept by the Ethereum treasury; docs/treasury.md#sweep-tasks).
 */
export function sweepTaskOf(deposit: Deposit, chain: string, assets: ReadonlySet<string>): { ok: true; task: SweepTaskCandidate } | { ok: false; reason: string } {
  if (deposit.chain !== chain) return { ok: false, reason: `deposit on ${deposit.chain}, not ${chain}` };
  if (!assets.has(deposit.asset)) return { ok: false, reason: `asset ${deposit.asset} is not swept on this network` };
  if (!isUuid(deposit.invoiceId) || !isUuid(deposit.projectId)) return { ok: false, reason: 'invoiceId or projectId is not a UUID' };
  if (!deposit.paymentId.startsWith(`${chain}:`)) return { ok: false, reason: 'paymentId is not of this chain' };
  const coin = findCryptoCurrency(deposit.asset);
  if (!coin.ok) return { ok: false, reason: coin.reason };
  const method = isPayNetwork(chain) ? payMethod(coin.value.code, chain) : undefined;
  if (!method) return { ok: false, reason: `${coin.value.code} is not carried on ${chain}` };
  const amount = parsePositiveDecimal(deposit.amount, method.baseUnitDecimals);
  if (!amount.ok) return { ok: false, reason: `amount ${amount.reason}` };
  return {
    ok: true,
    task: {
      paymentId: deposit.paymentId,
      invoiceId: deposit.invoiceId.toLowerCase(),
      projectId: deposit.projectId.toLowerCase(),
      asset: deposit.asset,
      depositAddress: deposit.address,
      addressIndex: deposit.addressIndex,
      amount: toBaseUnits(amount.value, method.baseUnitDecimals),
    },
  };
}

/** One intake round: pages from the cursor (less the overlap) to the end; answers the tasks created. */
export async function takeInAccountedDeposits(deps: SweepIntakeDeps): Promise<number> {
  const { sql, network } = deps;
  const overlapMs = deps.overlapMs ?? 120_000;
  const pageSize = deps.pageSize ?? 500;
  const [cursor] = await sql<{ reported_at: Date; row_id: string }[]>`
    select reported_at, row_id::text from sweep_intake_cursors where network = ${network}`;
  let after: { reportedAt: Date; rowId: bigint } | null = cursor ? { reportedAt: new Date(cursor.reported_at.getTime() - overlapMs), rowId: 0n } : null;
  let newest = cursor ? { reportedAt: cursor.reported_at, rowId: BigInt(cursor.row_id) } : null;
  const record = deps.record ?? (async (task: SweepTaskCandidate) => {
    const inserted = await sql`
      insert into sweep_tasks (payment_id, invoice_id, project_id, network, asset, deposit_address, address_index, amount)
      values (${task.paymentId}, ${task.invoiceId}, ${task.projectId}, ${network}, ${task.asset}, ${task.depositAddress},
              ${task.addressIndex}, ${task.amount.toString()})
      on conflict (payment_id) do nothing`;
    return inserted.count;
  });
  let created = 0;
  for (;;) {
    const page = await deps.listDeposits({
      chain: deps.chain,
      pageSize,
      ...(after ? { afterReportedAt: timestampFromDate(after.reportedAt), afterRowId: after.rowId } : {}),
    });
    for (const deposit of page.deposits) {
      const parsed = sweepTaskOf(deposit, deps.chain, deps.assets);
      if (!parsed.ok) {
        deps.logger.warn({ paymentId: deposit.paymentId, reason: parsed.reason }, 'sweep intake: deposit not taken in');
        continue;
      }
      created += await record(parsed.task);
    }
    const last = page.deposits.at(-1);
    if (last?.reportedAt) {
      const position = { reportedAt: timestampDate(last.reportedAt), rowId: last.rowId };
      after = position;
      if (!newest || position.reportedAt > newest.reportedAt || (position.reportedAt.getTime() === newest.reportedAt.getTime() && position.rowId > newest.rowId)) {
        newest = position;
      }
    }
    if (page.deposits.length < pageSize) break;
  }
  if (newest) {
    await sql`
      insert into sweep_intake_cursors (network, reported_at, row_id) values (${network}, ${newest.reportedAt}, ${newest.rowId.toString()})
      on conflict (network) do update set reported_at = excluded.reported_at, row_id = excluded.row_id, updated_at = now()`;
  }
  if (created > 0) deps.logger.info({ network, created }, deps.record ? 'deposit intake: deposits recorded' : 'sweep intake: sweep tasks created');
  return created;
}
