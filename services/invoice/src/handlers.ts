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
import type { DescMessage, MessageInitShape } from '@bufbuild/protobuf';
import type { ServiceImpl } from '@connectrpc/connect';
import { Code, errors, invalidRequest, requireValid, serviceError, type Sql } from '@coinvoice/runtime';
import { environmentFromProto, environmentToProto } from '@coinvoice/domain/environment';
import {
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
  type FindHouseAddressRequest,
  type FindHouseAddressResponseSchema,
  type ListAccountedDepositsResponseSchema,
  type ListLedgerCreditsResponseSchema,
  type InvoiceService,
  type ListInvoicesRequest,
  type ListInvoicesResponseSchema,
  type PayInvoiceRequest,
  type PayInvoiceResponseSchema,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { parseTolerancePercent } from './domain/payments';
import { quoteAtRates } from './domain/rates';
import { validateCreateInvoice, validateInvoiceId, validateInvoiceRef, validateListInvoices, validatePayInvoice } from './domain/requests';
import type { PayMethodCatalog } from './domain/pay-methods';
import type { CryptoCode, Chain } from '@coinvoice/chains/coin';
import { isChainName, WATCHED_CHAINS } from '@coinvoice/chains/watchers';
import { formatPlain } from '@coinvoice/domain/money';
import { networkOf } from '@coinvoice/domain/project-network';
import type { KeyRing } from './key-ring';
import type { InvoicePricing } from './rates/pricing';
import type { InvoiceMetrics } from './metrics';
import { checkoutToProto, invoiceToProto, INVOICE_STATUS, payMethodOf } from './proto';
import { findInvoiceById, isIssuedAddress, listInvoices, type InvoiceRow } from './store/invoices';
import { shownStatus } from './domain/status';
import { addressForms } from '@coinvoice/chains/address-forms';
import type { InvoiceWrites } from './invoice-writes';
import { ledgerPaymentId, listAccountedDeposits, listLedgerCredits } from './store/payments';
import { paymentsOfInvoice, paymentsOfInvoices, readInOneSnapshot } from './store/payments';

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
  /** CreateInvoice, PayInvoice and GetInvoice, group-committed (docs/performance.md#group-commit). */
  writes: InvoiceWrites;
  /** The EVM treasury addresses of this service's keys, lower case (treasuries.ts houseSendersOf). */
  evmTreasuries: ReadonlySet<string>;
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

    // The entry's key currency: USDT on tron gets a Tron address from the TRX key, USDT on any EVM
    // network an EVM address from the USDT key (docs/networks.md#amounts-and-addresses).
    const key = this.deps.keys.keyFor(method.keyCurrency, networkOf(request.environment));
    // Group-committed with the calls that arrive with it (docs/performance.md#group-commit).
    const outcome = await this.deps.writes.creations.submit({
      key,
      idempotency: request.idempotencyKey === undefined ? undefined : { projectId: request.projectId, key: request.idempotencyKey, fingerprint: request.fingerprint },
      row: {
        id: randomUUID(),
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
        successUrl: request.successUrl,
        cancelUrl: request.cancelUrl,
        isDonation: request.isDonation,
        lifetimeMinutes: request.lifetimeMinutes,
        confirmationsRequired: request.environment === 'live' ? this.deps.confirmationsFor(method.chain) : 0,
        paymentTolerancePercent: formatPlain(tolerance.value),
      },
    });
    if (outcome.replay) {
      this.deps.metrics?.idempotentReplays.inc();
      return { invoice: outcome.invoice, idempotentReplay: true };
    }
    this.deps.metrics?.created.inc({ pay_currency: request.payCurrency.code, environment: request.environment });
    return { invoice: outcome.invoice, idempotentReplay: false };
  }

  async getInvoice(req: GetInvoiceRequest): Reply<typeof GetInvoiceResponseSchema> {
    const ref = requireValid(validateInvoiceRef(req));
    const found = await this.deps.writes.reads.submit(ref);
    if (!found) throw invoiceNotFound();
    return { invoice: invoiceToProto(asShownNow(found.row), found.payments) };
  }

  async payInvoice(req: PayInvoiceRequest): Reply<typeof PayInvoiceResponseSchema> {
    const pay = requireValid(validatePayInvoice(req));
    const row = await this.deps.writes.payments.submit({
      projectId: pay.projectId,
      invoiceId: pay.invoiceId,
      amountReceived: pay.amountReceived,
      transactionHash: pay.transactionHash ?? randomBytes(32).toString('hex'),
    });
    this.deps.metrics?.paid.inc({ pay_currency: row.pay_currency });
    return { invoice: invoiceToProto(row) };
  }

  async listInvoices(req: ListInvoicesRequest): Reply<typeof ListInvoicesResponseSchema> {
    const status = req.status === undefined ? undefined : (INVOICE_STATUS.fromProto(req.status) ?? `unknown (${req.status})`);
    const query = requireValid(validateListInvoices({ projectId: req.projectId, status, orderId: req.orderId, pageSize: req.pageSize, cursor: req.cursor }));
    const now = new Date();
    const { page, payments } = await readInOneSnapshot(this.deps.sql, async (tx) => {
      const page = await listInvoices(tx, query, now);
      return { page, payments: await paymentsOfInvoices(tx, page.rows.map((row) => row.id)) };
    });
    return { invoices: page.rows.map((row) => invoiceToProto(asShownAt(row, now), payments.get(row.id))), nextCursor: page.nextCursor };
  }

  async getCheckout(req: GetCheckoutRequest): Reply<typeof GetCheckoutResponseSchema> {
    const invoiceId = requireValid(validateInvoiceId(req));
    const read = await readInOneSnapshot(this.deps.sql, async (tx) => {
      const row = await findInvoiceById(tx, invoiceId);
      return row && { row, payments: await paymentsOfInvoice(tx, row) };
    });
    if (!read) throw invoiceNotFound();
    const target = this.deps.payMethods.paymentTarget(payMethodOf(read.row), networkOf(read.row.environment));
    return { checkout: checkoutToProto(asShownNow(read.row), read.payments, target) };
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

  /** docs/treasury.md#house-addresses: the payout service refuses to pay out to these. */
  async findHouseAddress(req: FindHouseAddressRequest): Reply<typeof FindHouseAddressResponseSchema> {
    if (req.address.trim() === '' || req.address.length > 128) return { kind: '' };
    // Every spelling of the key behind it: EVM hex in any case, Tron base58 of the same 20 bytes,
    // bech32 in lower case (docs/treasury.md#house-addresses).
    const forms = addressForms(req.address);
    if (forms.some((form) => this.deps.evmTreasuries.has(form.toLowerCase()))) return { kind: 'treasury' };
    return { kind: (await isIssuedAddress(this.deps.sql, forms)) ? 'deposit' : '' };
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

/** The row with the status a read shows at `now` (`shownStatus`: a sandbox invoice past expiredAt reads Expired). */
function asShownAt(row: InvoiceRow, now: Date): InvoiceRow {
  const status = shownStatus({ environment: row.environment, status: row.status, expiredAt: row.expired_at }, now);
  return status === row.status ? row : { ...row, status };
}

function asShownNow(row: InvoiceRow): InvoiceRow {
  return asShownAt(row, new Date());
}
