/**
 * coinvoice.invoice.v1.InvoiceService. Error codes per RPC (ErrorDetail.code, Connect code):
 * - CreateInvoice: validation_failed (InvalidArgument, violations by public field name; payNetwork
 *   when the network does not carry payCurrency or is not enabled, naming those that carry it),
 *   idempotency_key_reused (FailedPrecondition; HTTP 422 by code).
 * - GetInvoice: validation_failed, not_found (also for another project's invoice).
 * - PayInvoice: validation_failed, not_found, sandbox_key_required (PermissionDenied) for a live
 *   invoice, invoice_not_payable (FailedPrecondition) unless Waiting and before expiredAt.
 * - ListInvoices: validation_failed (projectId, status, pageSize, cursor).
 * - GetCheckout, GetInvoiceProject: validation_failed, not_found.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { fromBinary, toBinary, type DescMessage, type MessageInitShape } from '@bufbuild/protobuf';
import type { ServiceImpl } from '@connectrpc/connect';
import { Code, enqueueEvent, errors, eventTransaction, invalidRequest, requireValid, serviceError, type Sql, type TransactionSql } from '@coinvoice/runtime';
import { environmentFromProto, environmentToProto } from '@coinvoice/domain/environment';
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
  type GetRatesResponseSchema,
  type ListCurrenciesResponseSchema,
  type ListLedgerCreditsRequest,
  type ListAccountedDepositsRequest,
  type ListAccountedDepositsResponseSchema,
  type ListLedgerCreditsResponseSchema,
  type Invoice,
  type InvoiceService,
  type ListInvoicesRequest,
  type ListInvoicesResponseSchema,
  type PayInvoiceRequest,
  type PayInvoiceResponseSchema,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { parseTolerancePercent } from './domain/payments';
import { quoteAtRates } from './domain/rates';
import { checkAmountForCoin, validateCreateInvoice, validateInvoiceId, validateInvoiceRef, validateListInvoices, validatePayInvoice, type NewInvoiceRequest } from './domain/requests';
import { payDecision } from './domain/status';
import type { PayMethodCatalog } from './domain/pay-methods';
import type { CryptoCode, Chain } from '@coinvoice/chains/coin';
import { isChainName, WATCHED_CHAINS } from '@coinvoice/chains/watchers';
import { Decimal, formatPlain } from '@coinvoice/domain/money';
import { networkOf } from '@coinvoice/domain/project-network';
import { invoiceCreatedEvent, invoicePaidEvent } from './events/invoice-events';
import type { KeyRing } from './key-ring';
import type { InvoicePricing } from './rates/pricing';
import type { InvoiceMetrics } from './metrics';
import { checkoutToProto, invoiceToProto, INVOICE_STATUS, payMethodOf } from './proto';
import { invoiceIdempotencyKeys } from './store/idempotency';
import { findInvoice, findInvoiceById, insertInvoice, listInvoices, lockInvoice, markPaid } from './store/invoices';
import { allocateAddressIndex } from './store/keys';
import { ledgerPaymentId, listAccountedDeposits, listLedgerCredits } from './store/payments';
import { paymentsOfInvoice, paymentsOfInvoices } from './store/payments';

type Reply<Schema extends DescMessage> = Promise<MessageInitShape<Schema>>;

export interface InvoiceHandlerDeps {
  sql: Sql;
  pricing: InvoicePricing;
  /** RATES_MAX_AGE_MS, shown by GetRates. */
  ratesMaxAgeMs: number;
  /** INVOICE_COINS: invoices in any other coin are refused. */
  enabledCoins: readonly CryptoCode[];
  keys: KeyRing;
  metrics?: InvoiceMetrics;
  /** Confirmations a new live invoice on a chain needs (fixed on the invoice at creation). */
  confirmationsFor: (chain: Chain) => number;
  /** The (asset, network) pairs taken here (docs/networks.md). */
  payMethods: PayMethodCatalog;
}

const invoiceNotFound = () => errors.notFound('invoice');

export class InvoiceHandlers implements ServiceImpl<typeof InvoiceService> {
  constructor(private readonly deps: InvoiceHandlerDeps) {}

  async createInvoice(req: CreateInvoiceRequest): Reply<typeof CreateInvoiceResponseSchema> {
    const request = requireValid(
      validateCreateInvoice({
        ...req,
        environment: environmentFromProto(req.environment) ?? `unspecified (${req.environment})`,
      }),
    );
    const payCurrency = request.payCurrency.code;
    if (!this.deps.enabledCoins.includes(payCurrency)) {
      throw invalidRequest([{ field: 'payCurrency', message: `is not accepted here (accepted: ${this.deps.enabledCoins.join(', ')})` }]);
    }
    // The (asset, network) paid in: refused unless this deployment takes it (docs/networks.md).
    const resolved = this.deps.payMethods.resolve(payCurrency, request.payNetwork);
    if (!resolved.ok) throw invalidRequest([{ field: 'payNetwork', message: resolved.reason }]);
    const method = resolved.value;
    if (req.validateOnly) return {};
    // Cached rates only (refreshed in the background): a request never waits for a provider.
    const rates = this.deps.pricing.ratesFor(request.environment, payCurrency, request.priceCurrency.code);
    if (!rates) {
      throw serviceError(
        Code.Unavailable,
        'rates_unavailable',
        `no fresh exchange rate for ${payCurrency}/${request.priceCurrency.code}: live invoices are never priced from a stale quote; try again shortly`,
      );
    }
    const quoted = quoteAtRates({ priceAmount: request.priceAmount, priceCurrency: request.priceCurrency.code, payCurrency, payMethod: method }, rates);
    if (!quoted.ok) throw invalidRequest([{ field: 'priceAmount', message: quoted.reason }]);
    const tolerance = parseTolerancePercent(req.paymentTolerancePercent);
    if (!tolerance.ok) throw invalidRequest([{ field: 'paymentTolerancePercent', message: tolerance.reason }]);
    const { rate, amountExpected, priceAmountInUsd } = quoted.value;

    const invoiceId = randomUUID();
    // The address before the transaction: its index is taken in a statement of its own and the
    // derivation is CPU work, so neither holds a lock or a pooled transaction open (a replay of an
    // idempotent request leaves its index unused: a gap, never a reuse).
    // The entry's key currency: USDT on tron gets a Tron address from the TRX key, USDT on any EVM
    // network an EVM address from the USDT key (docs/networks.md#amounts-and-addresses).
    const key = this.deps.keys.keyFor(method.keyCurrency, networkOf(request.environment));
    const index = await allocateAddressIndex(this.deps.sql, key.keyId);
    const address = key.deriver.addressAt(index);
    const outcome = await eventTransaction(this.deps.sql, async (tx) => {
      if (request.idempotencyKey !== undefined) {
        const claimed = await invoiceIdempotencyKeys.claim(tx, {
          projectId: request.projectId,
          key: request.idempotencyKey,
          requestHash: request.fingerprint,
          resourceId: invoiceId,
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
        payCurrency: method.code,
        payNetwork: method.chain,
        rate: formatPlain(rate),
        rateSources: [...rates.sources],
        rateQuotedAt: rates.quotedAt,
        amountExpected: formatPlain(amountExpected),
        address,
        keyId: key.keyId,
        addressIndex: index,
        successUrl: request.successUrl,
        cancelUrl: request.cancelUrl,
        isDonation: request.isDonation,
        lifetimeMinutes: request.lifetimeMinutes,
        confirmationsRequired: request.environment === 'live' ? this.deps.confirmationsFor(method.chain) : 0,
        paymentTolerancePercent: formatPlain(tolerance.value),
      });
      await enqueueEvent(tx, invoiceCreatedEvent(row));
      const invoice = invoiceToProto(row);
      if (request.idempotencyKey !== undefined) {
        await invoiceIdempotencyKeys.saveResponse(tx, request.projectId, request.idempotencyKey, toBinary(InvoiceSchema, invoice));
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

  /** The first response to this Idempotency-Key, when the body is the same (else refused). */
  private replay(tx: TransactionSql, request: NewInvoiceRequest): Promise<Invoice> {
    return invoiceIdempotencyKeys.replay(
      tx,
      { projectId: request.projectId, key: request.idempotencyKey!, fingerprint: request.fingerprint },
      {
        decode: (response) => fromBinary(InvoiceSchema, response),
        load: async (invoiceId) => {
          const row = await findInvoice(tx, request.projectId, invoiceId);
          return row && invoiceToProto(row);
        },
      },
    );
  }

  async getInvoice(req: GetInvoiceRequest): Reply<typeof GetInvoiceResponseSchema> {
    const ref = requireValid(validateInvoiceRef(req));
    const row = await findInvoice(this.deps.sql, ref.projectId, ref.invoiceId);
    if (!row) throw invoiceNotFound();
    return { invoice: invoiceToProto(row, await paymentsOfInvoice(this.deps.sql, row)) };
  }

  async payInvoice(req: PayInvoiceRequest): Reply<typeof PayInvoiceResponseSchema> {
    const pay = requireValid(validatePayInvoice(req));
    const transactionHash = pay.transactionHash ?? randomBytes(32).toString('hex');
    const row = await eventTransaction(this.deps.sql, async (tx) => {
      const locked = await lockInvoice(tx, pay.projectId, pay.invoiceId);
      if (!locked) throw invoiceNotFound();
      const { invoice, now } = locked;
      if (invoice.environment !== 'sandbox') {
        throw errors.forbidden('sandbox_key_required', 'only a sandbox invoice can be paid by simulation; this invoice is live');
      }
      const decision = payDecision({ status: invoice.status, expiredAt: invoice.expired_at }, now);
      if (!decision.ok) throw errors.conflict('invoice_not_payable', decision.reason);
      const coin = payMethodOf(invoice);
      if (pay.amountReceived) {
        const violation = checkAmountForCoin(pay.amountReceived, coin);
        if (violation) throw invalidRequest([violation]);
      }
      const paid = await markPaid(tx, invoice.id, {
        amountReceived: pay.amountReceived ? formatPlain(pay.amountReceived) : invoice.amount_expected,
        transactionHash,
      });
      // The lock and the checks above make this unreachable; the SQL guard keeps it impossible.
      if (!paid) throw errors.conflict('invoice_not_payable', 'invoice is no longer payable');
      await enqueueEvent(tx, invoicePaidEvent(paid, new Decimal(paid.amount_received)));
      return paid;
    });
    this.deps.metrics?.paid.inc({ pay_currency: row.pay_currency });
    return { invoice: invoiceToProto(row) };
  }

  async listInvoices(req: ListInvoicesRequest): Reply<typeof ListInvoicesResponseSchema> {
    const status = req.status === undefined ? undefined : (INVOICE_STATUS.fromProto(req.status) ?? `unknown (${req.status})`);
    const query = requireValid(validateListInvoices({ projectId: req.projectId, status, orderId: req.orderId, pageSize: req.pageSize, cursor: req.cursor }));
    const page = await listInvoices(this.deps.sql, query);
    const payments = await paymentsOfInvoices(this.deps.sql, page.rows.map((row) => row.id));
    return { invoices: page.rows.map((row) => invoiceToProto(row, payments.get(row.id))), nextCursor: page.nextCursor };
  }

  async getCheckout(req: GetCheckoutRequest): Reply<typeof GetCheckoutResponseSchema> {
    const invoiceId = requireValid(validateInvoiceId(req));
    const row = await findInvoiceById(this.deps.sql, invoiceId);
    if (!row) throw invoiceNotFound();
    const target = this.deps.payMethods.paymentTarget(payMethodOf(row), networkOf(row.environment));
    return { checkout: checkoutToProto(row, await paymentsOfInvoice(this.deps.sql, row), target) };
  }

  async listLedgerCredits(req: ListLedgerCreditsRequest): Reply<typeof ListLedgerCreditsResponseSchema> {
    const after = req.afterInvoiceId === '' ? null : requireValid(validateInvoiceId({ invoiceId: req.afterInvoiceId }));
    const pageSize = req.pageSize <= 0 ? 500 : Math.min(req.pageSize, 2000);
    const rows = await listLedgerCredits(this.deps.sql, after, pageSize);
    const invoices = new Set(rows.map((row) => row.invoice_id));
    return {
      credits: rows.map((row) => ({
        invoiceId: row.invoice_id,
        projectId: row.project_id,
        paymentId: row.kind === 'late' ? ledgerPaymentId({ chain: row.chain!, transaction_hash: row.transaction_hash!, output_index: row.output_index! }) : '',
        currency: row.currency,
        network: row.network,
        amount: row.amount,
        reportedAt: timestampFromDate(row.reported_at),
      })),
      nextAfterInvoiceId: invoices.size < pageSize ? '' : rows[rows.length - 1]!.invoice_id,
    };
  }

  async listAccountedDeposits(req: ListAccountedDepositsRequest): Reply<typeof ListAccountedDepositsResponseSchema> {
    if (!isChainName(req.chain)) throw invalidRequest([{ field: 'chain', message: `must be one of ${WATCHED_CHAINS.join(', ')}` }]);
    if (req.afterReportedAt === undefined && req.afterRowId !== 0n) {
      throw invalidRequest([{ field: 'afterRowId', message: 'needs afterReportedAt' }]);
    }
    const after = req.afterReportedAt ? { reportedAt: timestampDate(req.afterReportedAt), id: req.afterRowId.toString() } : null;
    const pageSize = req.pageSize <= 0 ? 500 : Math.min(req.pageSize, 2000);
    const rows = await listAccountedDeposits(this.deps.sql, req.chain, after, pageSize);
    return {
      deposits: rows.map((row) => ({
        paymentId: ledgerPaymentId(row),
        invoiceId: row.invoice_id,
        projectId: row.project_id,
        chain: row.chain,
        address: row.address,
        addressIndex: row.address_index,
        asset: row.asset,
        amount: row.amount,
        reportedAt: timestampFromDate(row.reported_at),
        rowId: BigInt(row.id),
      })),
    };
  }

  async listCurrencies(): Reply<typeof ListCurrenciesResponseSchema> {
    return {
      currencies: this.deps.payMethods.list().map((listing) => ({
        currency: listing.method.code,
        network: listing.method.chain,
        name: listing.method.name,
        networkLabel: listing.networkLabel,
        decimals: listing.method.amountDecimals,
        baseUnitDecimals: listing.method.baseUnitDecimals,
        confirmations: listing.confirmations,
        minimumAmount: formatPlain(listing.minimumAmount),
        contract: listing.contract,
        chainId: listing.chainId === undefined ? undefined : BigInt(listing.chainId),
        watched: listing.watched,
      })),
    };
  }

  async getRates(): Reply<typeof GetRatesResponseSchema> {
    const overview = this.deps.pricing.overview();
    return {
      source: overview.source,
      maxAgeMs: BigInt(this.deps.ratesMaxAgeMs),
      rates: overview.prices.map((p) => ({
        currency: p.currency,
        usd: formatPlain(p.usd),
        sources: [...p.sources],
        quotedAt: p.quotedAt ? timestampFromDate(p.quotedAt) : undefined,
      })),
      providers: overview.providers.map((p) => ({
        name: p.name,
        fetchedAt: p.fetchedAt ? timestampFromDate(p.fetchedAt) : undefined,
        healthy: p.healthy,
      })),
    };
  }

  async getInvoiceProject(req: GetInvoiceProjectRequest): Reply<typeof GetInvoiceProjectResponseSchema> {
    const invoiceId = requireValid(validateInvoiceId(req));
    const row = await findInvoiceById(this.deps.sql, invoiceId);
    if (!row) throw invoiceNotFound();
    return { projectId: row.project_id, environment: environmentToProto(row.environment) };
  }
}
