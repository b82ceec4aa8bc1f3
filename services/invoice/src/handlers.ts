/**
 * coinvoice.invoice.v1.InvoiceService. Error codes per RPC (ErrorDetail.code, Connect code):
 * - CreateInvoice: validation_failed (InvalidArgument, violations by public field name),
 *   idempotency_key_reused (FailedPrecondition; HTTP 422 by code).
 * - GetInvoice: validation_failed, not_found (also for another project's invoice).
 * - PayInvoice: validation_failed, not_found, sandbox_key_required (PermissionDenied) for a live
 *   invoice, invoice_not_payable (FailedPrecondition) unless Waiting and before expiredAt.
 * - ListInvoices: validation_failed (projectId, status, pageSize, cursor).
 * - GetCheckout, GetInvoiceProject: validation_failed, not_found.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { fromBinary, toBinary, type DescMessage, type MessageInitShape } from '@bufbuild/protobuf';
import type { ServiceImpl } from '@connectrpc/connect';
import { Code, enqueueEvent, errors, serviceError, type Sql, type TransactionSql, type Violation } from '@coinvoice/runtime';
import {
  InvoiceSchema,
  type CreateInvoiceRequest,
  type CreateInvoiceResponseSchema,
  type GetCheckoutRequest,
  type GetCheckoutResponseSchema,
  type GetInvoiceProjectRequest,
  type GetInvoiceProjectResponseSchema,
  type GetInvoiceRequest,
  type GetInvoiceResponseSchema,
  type Invoice,
  type InvoiceService,
  type ListInvoicesRequest,
  type ListInvoicesResponseSchema,
  type PayInvoiceRequest,
  type PayInvoiceResponseSchema,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import {
  checkAmountForCoin,
  cryptoCurrency,
  encodeCursor,
  formatPlain,
  isCryptoCode,
  networkOf,
  payDecision,
  quote,
  validateCreateInvoice,
  validateInvoiceId,
  validateInvoiceRef,
  validateListInvoices,
  validatePayInvoice,
  type NewInvoiceRequest,
  type RateProvider,
  type Validated,
} from './domain';
import { invoiceCreatedEvent, invoicePaidEvent } from './events/invoice-events';
import type { KeyRing } from './key-ring';
import type { InvoiceMetrics } from './metrics';
import { checkoutToProto, environmentFromProto, environmentToProto, invoiceToProto, statusFromProto } from './proto';
import { claimIdempotencyKey, findIdempotencyKey, saveIdempotentResponse } from './store/idempotency';
import { findInvoice, findInvoiceById, insertInvoice, listInvoices, lockInvoice, markPaid } from './store/invoices';
import { allocateAddressIndex } from './store/keys';

type Reply<Schema extends DescMessage> = Promise<MessageInitShape<Schema>>;

export interface InvoiceHandlerDeps {
  sql: Sql;
  rates: RateProvider;
  keys: KeyRing;
  metrics?: InvoiceMetrics;
}

/** Throws validation_failed with the violations, or returns the value. */
function valid<T>(result: Validated<T>): T {
  if (result.ok) return result.value;
  throw invalid(result.violations);
}

function invalid(violations: Violation[]) {
  const summary = violations.map((v) => `${v.field} ${v.message}`).join('; ');
  return errors.validation(violations, `the request is invalid: ${summary}`);
}

const invoiceNotFound = () => errors.notFound('invoice');

export class InvoiceHandlers implements ServiceImpl<typeof InvoiceService> {
  constructor(private readonly deps: InvoiceHandlerDeps) {}

  async createInvoice(req: CreateInvoiceRequest): Reply<typeof CreateInvoiceResponseSchema> {
    const request = valid(
      validateCreateInvoice({
        ...req,
        environment: environmentFromProto(req.environment) ?? `unspecified (${req.environment})`,
      }),
    );
    // Rates before the transaction: a slow provider must not hold locks.
    const quoted = await quote(
      { priceAmount: request.priceAmount, priceCurrency: request.priceCurrency.code, payCurrency: request.payCurrency.code },
      this.deps.rates,
    );
    if (!quoted.ok) throw invalid([{ field: 'priceAmount', message: quoted.reason }]);
    const { rate, amountExpected, priceAmountInUsd } = quoted.value;

    const invoiceId = randomUUID();
    // The address before the transaction: its index is taken in a statement of its own and the
    // derivation is CPU work, so neither holds a lock or a pooled transaction open (a replay of an
    // idempotent request leaves its index unused: a gap, never a reuse).
    const key = this.deps.keys.keyFor(request.payCurrency.code, networkOf(request.environment));
    const index = await allocateAddressIndex(this.deps.sql, key.keyId);
    const address = key.deriver.addressAt(index);
    const outcome = await this.deps.sql.begin(async (tx) => {
      if (request.idempotencyKey !== undefined) {
        const claimed = await claimIdempotencyKey(tx, {
          projectId: request.projectId,
          key: request.idempotencyKey,
          requestHash: request.fingerprint,
          invoiceId,
        });
        if (!claimed) return { replayOf: await this.replay(tx, request) };
      }
      const row = await insertInvoice(tx, {
        id: invoiceId,
        projectId: request.projectId,
        environment: request.environment,
        projectName: request.projectName,
        orderId: request.orderId ?? null,
        orderDescription: request.orderDescription ?? null,
        priceAmount: formatPlain(request.priceAmount),
        priceCurrency: request.priceCurrency.code,
        priceAmountInUsd: formatPlain(priceAmountInUsd),
        payCurrency: request.payCurrency.code,
        rate: formatPlain(rate),
        amountExpected: formatPlain(amountExpected),
        address,
        keyId: key.keyId,
        addressIndex: index,
        successUrl: request.successUrl,
        cancelUrl: request.cancelUrl,
        isDonation: request.isDonation,
        lifetimeMinutes: request.lifetimeMinutes,
      });
      await enqueueEvent(tx, invoiceCreatedEvent(row));
      const invoice = invoiceToProto(row);
      if (request.idempotencyKey !== undefined) {
        await saveIdempotentResponse(tx, request.projectId, request.idempotencyKey, toBinary(InvoiceSchema, invoice));
      }
      return { created: invoice };
    });
    if ('replayOf' in outcome) {
      this.deps.metrics?.idempotentReplays.inc();
      return { invoice: outcome.replayOf, idempotentReplay: true };
    }
    this.deps.metrics?.created.inc({ pay_currency: request.payCurrency.code, environment: request.environment });
    return { invoice: outcome.created, idempotentReplay: false };
  }

  /**
   * The key is held by an earlier request (committed: the claim waited for it). The same body gets
   * the first response again; another body is refused.
   */
  private async replay(tx: TransactionSql, request: NewInvoiceRequest): Promise<Invoice> {
    const key = request.idempotencyKey!;
    const record = await findIdempotencyKey(tx, request.projectId, key);
    if (!record) {
      // Unreachable: the claim and this read share the transaction's now(), and only rows past it
      // are ever deleted. Answered as a retryable conflict rather than an internal error.
      throw serviceError(Code.Aborted, 'conflict', 'the idempotency key changed during the request; retry');
    }
    if (record.request_hash !== request.fingerprint) {
      throw errors.conflict(
        'idempotency_key_reused',
        'this Idempotency-Key was already used with a different request body; use a new key for a new request',
      );
    }
    if (record.response) return fromBinary(InvoiceSchema, record.response);
    const row = await findInvoice(tx, request.projectId, record.invoice_id);
    if (!row) throw new Error(`idempotency key refers to missing invoice ${record.invoice_id}`);
    return invoiceToProto(row);
  }

  async getInvoice(req: GetInvoiceRequest): Reply<typeof GetInvoiceResponseSchema> {
    const ref = valid(validateInvoiceRef(req));
    const row = await findInvoice(this.deps.sql, ref.projectId, ref.invoiceId);
    if (!row) throw invoiceNotFound();
    return { invoice: invoiceToProto(row) };
  }

  async payInvoice(req: PayInvoiceRequest): Reply<typeof PayInvoiceResponseSchema> {
    const pay = valid(validatePayInvoice(req));
    const transactionHash = pay.transactionHash ?? randomBytes(32).toString('hex');
    const row = await this.deps.sql.begin(async (tx) => {
      const locked = await lockInvoice(tx, pay.projectId, pay.invoiceId);
      if (!locked) throw invoiceNotFound();
      const { invoice, now } = locked;
      if (invoice.environment !== 'sandbox') {
        throw errors.forbidden('sandbox_key_required', 'only a sandbox invoice can be paid by simulation; this invoice is live');
      }
      const decision = payDecision({ status: invoice.status, expiredAt: invoice.expired_at }, now);
      if (!decision.ok) throw errors.conflict('invoice_not_payable', decision.reason);
      if (!isCryptoCode(invoice.pay_currency)) throw new Error(`invoice ${invoice.id} has unknown pay currency`);
      const coin = cryptoCurrency(invoice.pay_currency);
      if (pay.amountReceived) {
        const violation = checkAmountForCoin(pay.amountReceived, coin);
        if (violation) throw invalid([violation]);
      }
      const paid = await markPaid(tx, invoice.id, {
        amountReceived: pay.amountReceived ? formatPlain(pay.amountReceived) : invoice.amount_expected,
        transactionHash,
      });
      // The lock and the checks above make this unreachable; the SQL guard keeps it impossible.
      if (!paid) throw errors.conflict('invoice_not_payable', 'invoice is no longer payable');
      await enqueueEvent(tx, invoicePaidEvent(paid));
      return paid;
    });
    this.deps.metrics?.paid.inc({ pay_currency: row.pay_currency });
    return { invoice: invoiceToProto(row) };
  }

  async listInvoices(req: ListInvoicesRequest): Reply<typeof ListInvoicesResponseSchema> {
    const status = req.status === undefined ? undefined : (statusFromProto(req.status) ?? `unknown (${req.status})`);
    const query = valid(validateListInvoices({ projectId: req.projectId, status, pageSize: req.pageSize, cursor: req.cursor }));
    // One more than asked tells whether another page follows.
    const rows = await listInvoices(this.deps.sql, {
      projectId: query.projectId,
      status: query.status,
      after: query.after,
      limit: query.pageSize + 1,
    });
    const page = rows.slice(0, query.pageSize);
    const last = page[page.length - 1];
    return {
      invoices: page.map(invoiceToProto),
      nextCursor: rows.length > query.pageSize && last ? encodeCursor({ createdAt: last.created_at, id: last.id }) : '',
    };
  }

  async getCheckout(req: GetCheckoutRequest): Reply<typeof GetCheckoutResponseSchema> {
    const invoiceId = valid(validateInvoiceId(req));
    const row = await findInvoiceById(this.deps.sql, invoiceId);
    if (!row) throw invoiceNotFound();
    return { checkout: checkoutToProto(row) };
  }

  async getInvoiceProject(req: GetInvoiceProjectRequest): Reply<typeof GetInvoiceProjectResponseSchema> {
    const invoiceId = valid(validateInvoiceId(req));
    const row = await findInvoiceById(this.deps.sql, invoiceId);
    if (!row) throw invoiceNotFound();
    return { projectId: row.project_id, environment: environmentToProto(row.environment) };
  }
}
