/**
 * The invoice service's hot writes and reads, group-committed (docs/performance.md#group-commit):
 * concurrent CreateInvoice, PayInvoice and GetInvoice calls are gathered and each group runs as one
 * transaction with multi-row statements (reads, and creations without an Idempotency-Key: one
 * statement); each caller is answered after it has committed.
 * The rules themselves (what may be created, paid, seen) are the handlers' and the domain's; this
 * module only decides how many rows a statement carries.
 */
import { decodeBinary, encodeBinary, enqueueEvents, errors, eventTransaction, GroupCommit, invalidRequest, type BatchOutcome, type Sql, type TransactionSql } from '@coinvoice/runtime';
import { InvoiceSchema, type Invoice } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import type { AddressDeriver } from '@coinvoice/chains/addresses';
import { Decimal, formatPlain, type Decimal as DecimalValue } from '@coinvoice/domain/money';
import { checkAmountForCoin } from './domain/requests';
import { payDecision } from './domain/status';
import { invoicePaidEvent } from './events/invoice-events';
import { invoiceToProto, payMethodOf } from './proto';
import { invoiceIdempotencyKeys } from './store/idempotency';
import { findInvoice, findInvoicesById, insertInvoices, lockInvoices, markPaidMany, type InvoiceRow, type NewInvoiceRow } from './store/invoices';
import { allocateAddressIndexes } from './store/keys';
import { paymentsOfInvoices, readInOneSnapshot, type PaymentRow } from './store/payments';

/** A validated, priced CreateInvoice waiting for its batch: everything but its address. */
export interface InvoiceCreation {
  row: Omit<NewInvoiceRow, 'address' | 'keyId' | 'addressIndex'>;
  key: { keyId: number; deriver: Pick<AddressDeriver, 'addressAt'> };
  /** With an Idempotency-Key: the key and the request's fingerprint. */
  idempotency?: { projectId: string; key: string; fingerprint: string };
}

export interface CreatedInvoice {
  invoice: Invoice;
  /** The first response to this Idempotency-Key, answered again. */
  replay: boolean;
}

/** A validated PayInvoice (sandbox simulation) waiting for its batch. */
export interface InvoicePayment {
  projectId: string;
  invoiceId: string;
  amountReceived: DecimalValue | undefined;
  transactionHash: string;
}

export interface InvoiceRef {
  projectId: string;
  invoiceId: string;
}

export interface InvoiceWithPayments {
  row: InvoiceRow;
  payments: PaymentRow[];
}

export interface InvoiceWritesOptions {
  sql: Sql;
  /** Most calls per batch (default 64) and longest wait for more while one runs (default 2 ms). */
  maxItems?: number;
  maxWaitMs?: number;
  onBatch?: (kind: 'create' | 'pay' | 'get', size: number, retriedAlone: boolean) => void;
}

const ok = <T>(value: T): BatchOutcome<T> => ({ ok: true, value });
const failed = <T>(error: unknown): BatchOutcome<T> => ({ ok: false, error });

export class InvoiceWrites {
  readonly creations: GroupCommit<InvoiceCreation, CreatedInvoice>;
  readonly payments: GroupCommit<InvoicePayment, InvoiceRow>;
  readonly reads: GroupCommit<InvoiceRef, InvoiceWithPayments | undefined>;
  private readonly sql: Sql;

  constructor(options: InvoiceWritesOptions) {
    this.sql = options.sql;
    const common = { maxItems: options.maxItems, maxWaitMs: options.maxWaitMs };
    this.creations = new GroupCommit({
      ...common,
      run: (items) => this.createAll(items),
      // Two calls with one Idempotency-Key never share a batch: the second replays the first.
      exclusiveKey: (item) => (item.idempotency ? `${item.idempotency.projectId.toLowerCase()} ${item.idempotency.key}` : undefined),
      onBatch: (size, retried) => options.onBatch?.('create', size, retried),
    });
    this.payments = new GroupCommit({
      ...common,
      run: (items) => this.payAll(items),
      // Payers of one invoice queue on its row lock in turn, each seeing the previous outcome.
      exclusiveKey: (item) => item.invoiceId.toLowerCase(),
      onBatch: (size, retried) => options.onBatch?.('pay', size, retried),
    });
    this.reads = new GroupCommit({
      ...common,
      maxInFlight: 4,
      run: (items) => this.readAll(items),
      onBatch: (size, retried) => options.onBatch?.('get', size, retried),
    });
  }

  private async createAll(items: readonly InvoiceCreation[]): Promise<Array<BatchOutcome<CreatedInvoice>>> {
    // The addresses before the transaction: the indexes in a statement of their own and the
    // derivation is CPU work, so neither holds a lock or a pooled transaction open (a replay of
    // an idempotent request leaves its index unused: a gap, never a reuse).
    const indexes = await allocateAddressIndexes(this.sql, items.map((item) => item.key.keyId));
    const rows: NewInvoiceRow[] = items.map((item, n) => ({
      ...item.row,
      keyId: item.key.keyId,
      addressIndex: indexes[n]!,
      address: item.key.deriver.addressAt(indexes[n]!),
    }));
    // No event: nothing acts on a creation (docs/performance.md#events). Without an
    // Idempotency-Key in the batch, its one INSERT is atomic on its own: no BEGIN, no COMMIT.
    if (items.every((item) => item.idempotency === undefined)) {
      const inserted = await insertInvoices(this.sql, rows);
      return inserted.map((row) => ok({ invoice: invoiceToProto(row), replay: false }));
    }
    return this.sql.begin(async (tx) => {
      // Claimed first: a concurrent duplicate waits on the key, then replays (runtime idempotency.ts).
      const idempotent = items.flatMap((item, n) => (item.idempotency ? [{ n, idempotency: item.idempotency }] : []));
      const claimed = await invoiceIdempotencyKeys.claimMany(
        tx,
        idempotent.map(({ n, idempotency }) => ({ projectId: idempotency.projectId, key: idempotency.key, requestHash: idempotency.fingerprint, resourceId: rows[n]!.id })),
      );
      const replays = new Set(idempotent.filter((_, i) => !claimed[i]).map(({ n }) => n));
      const inserted = await insertInvoices(tx, rows.filter((_, n) => !replays.has(n)));
      const created = new Map(inserted.map((row) => [row.id, invoiceToProto(row)]));
      await invoiceIdempotencyKeys.saveResponses(
        tx,
        idempotent
          .filter(({ n }) => !replays.has(n))
          .map(({ n, idempotency }) => ({ projectId: idempotency.projectId, key: idempotency.key, response: encodeBinary(InvoiceSchema, created.get(rows[n]!.id)!) })),
      );
      const outcomes: Array<BatchOutcome<CreatedInvoice>> = [];
      for (const [n, item] of items.entries()) {
        if (!replays.has(n)) {
          outcomes.push(ok({ invoice: created.get(rows[n]!.id)!, replay: false }));
          continue;
        }
        try {
          outcomes.push(ok({ invoice: await replay(tx, item.idempotency!), replay: true }));
        } catch (err) {
          outcomes.push(failed(err));
        }
      }
      return outcomes;
    });
  }

  private payAll(items: readonly InvoicePayment[]): Promise<Array<BatchOutcome<InvoiceRow>>> {
    return eventTransaction(this.sql, async (tx) => {
      // Concurrent payers queue on the row locks and each sees the previous one's outcome.
      const { invoices, now } = await lockInvoices(tx, items.map((item) => item.invoiceId));
      const outcomes: Array<BatchOutcome<InvoiceRow> | undefined> = [];
      const toPay: Array<{ n: number; amountReceived: string; transactionHash: string }> = [];
      for (const [n, item] of items.entries()) {
        const invoice = invoices.get(item.invoiceId.toLowerCase());
        const refusal = invoice === undefined || invoice.project_id !== item.projectId.toLowerCase() ? errors.notFound('invoice') : payRefusal(invoice, item, now);
        if (refusal) {
          outcomes[n] = failed(refusal);
          continue;
        }
        toPay.push({ n, amountReceived: item.amountReceived ? formatPlain(item.amountReceived) : invoice!.amount_expected, transactionHash: item.transactionHash });
      }
      const paid = await markPaidMany(
        tx,
        toPay.map(({ n, amountReceived, transactionHash }) => ({ invoiceId: items[n]!.invoiceId, amountReceived, transactionHash })),
      );
      const paidRows: InvoiceRow[] = [];
      for (const { n } of toPay) {
        const row = paid.get(items[n]!.invoiceId.toLowerCase());
        // The locks and the checks above make a miss unreachable; the SQL guard keeps it impossible.
        if (!row) outcomes[n] = failed(errors.conflict('invoice_not_payable', 'invoice is no longer payable'));
        else {
          outcomes[n] = ok(row);
          paidRows.push(row);
        }
      }
      await enqueueEvents(tx, paidRows.map((row) => invoicePaidEvent(row, new Decimal(row.amount_received))));
      return outcomes.map((outcome) => outcome!);
    });
  }

  private async readAll(refs: readonly InvoiceRef[]): Promise<Array<BatchOutcome<InvoiceWithPayments | undefined>>> {
    const rows = await findInvoicesById(this.sql, refs.map((ref) => ref.invoiceId));
    // Another project's invoice is as absent as a missing one.
    const visible = refs.map((ref) => {
      const row = rows.get(ref.invoiceId.toLowerCase());
      return row && row.project_id === ref.projectId.toLowerCase() ? row : undefined;
    });
    const liveIds = visible.filter((row) => row?.environment === 'live').map((row) => row!.id);
    if (liveIds.length === 0) return visible.map((row) => ok(row && { row, payments: [] }));
    // A live invoice and its payments are read again from ONE snapshot (readInOneSnapshot).
    const { current, payments } = await readInOneSnapshot(this.sql, async (tx) => ({
      current: await findInvoicesById(tx, liveIds),
      payments: await paymentsOfInvoices(tx, liveIds),
    }));
    return visible.map((row) => {
      if (!row || row.environment !== 'live') return ok(row && { row, payments: [] });
      const now = current.get(row.id) ?? row;
      return ok({ row: now, payments: payments.get(row.id) ?? [] });
    });
  }
}

/** Why a locked invoice cannot be paid by this simulation, or undefined when it can. */
function payRefusal(invoice: InvoiceRow, pay: InvoicePayment, now: Date): Error | undefined {
  if (invoice.environment !== 'sandbox') {
    return errors.forbidden('sandbox_key_required', 'only a sandbox invoice can be paid by simulation; this invoice is live');
  }
  const decision = payDecision({ status: invoice.status, expiredAt: invoice.expired_at }, now);
  if (!decision.ok) return errors.conflict('invoice_not_payable', decision.reason);
  if (pay.amountReceived) {
    const violation = checkAmountForCoin(pay.amountReceived, payMethodOf(invoice));
    if (violation) return invalidRequest([violation]);
  }
  return undefined;
}

/** The first response to an Idempotency-Key, when the body is the same (else refused). */
function replay(tx: TransactionSql, idempotency: NonNullable<InvoiceCreation['idempotency']>): Promise<Invoice> {
  return invoiceIdempotencyKeys.replay(
    tx,
    { projectId: idempotency.projectId, key: idempotency.key, fingerprint: idempotency.fingerprint },
    {
      decode: (response) => decodeBinary(InvoiceSchema, response),
      load: async (invoiceId) => {
        const row = await findInvoice(tx, idempotency.projectId, invoiceId);
        return row && invoiceToProto(row);
      },
    },
  );
}
