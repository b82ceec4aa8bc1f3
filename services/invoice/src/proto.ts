/**
 * Rows to protobuf messages and proto enums to domain names. Amounts leave as decimal strings:
 * fiat prices with their currency's minor units ("19.90", "1500" for JPY), priceAmountInUsd with
 * cents, crypto amounts in canonical plain form ("0.00018096", "0").
 */
import { create } from '@bufbuild/protobuf';
import { protoEnumMapping } from '@coinvoice/runtime';
import { environmentFromProto, environmentToProto } from '@coinvoice/domain/environment';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  CheckoutSchema,
  InvoiceSchema,
  PaymentSchema,
  InvoiceStatus,
  type Checkout,
  type Invoice,
  type Payment,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { deriveInvoiceState, isLivePayment, paysInvoice } from './domain/payments';
import type { InvoiceStatusName } from './domain/status';
import type { CryptoCurrency } from '@coinvoice/chains/coin';
import { isCryptoCode, isPayNetwork, networkLabel, payMethod, paymentUri } from '@coinvoice/chains/currencies';
import type { PaymentTarget } from '@coinvoice/chains/family';
import { fiatCurrency, isFiatCode } from '@coinvoice/domain/fiat';
import { Decimal, formatFixed, formatPlain } from '@coinvoice/domain/money';
import { invoiceFacts, paymentFacts } from './settlement';
import type { InvoiceRow } from './store/invoices';
import type { PaymentRow } from './store/payments';

/** Status names and the proto enum, both ways (fromProto: undefined for UNSPECIFIED or an unknown number). */
export const INVOICE_STATUS = protoEnumMapping<InvoiceStatusName, InvoiceStatus>({
  Waiting: InvoiceStatus.WAITING,
  Paid: InvoiceStatus.PAID,
  Expired: InvoiceStatus.EXPIRED,
  Confirming: InvoiceStatus.CONFIRMING,
  PartiallyPaid: InvoiceStatus.PARTIALLY_PAID,
});

function fiatAmount(amount: string, currency: string): string {
  if (!isFiatCode(currency)) throw new Error(`stored invoice has unknown price currency ${currency}`);
  return formatFixed(new Decimal(amount), fiatCurrency(currency).minorUnits);
}

/** The registry entry a stored invoice is paid in: its pay_currency on its pay_network. */
export function payMethodOf(row: Pick<InvoiceRow, 'id' | 'pay_currency' | 'pay_network'>): CryptoCurrency {
  const method = isCryptoCode(row.pay_currency) && isPayNetwork(row.pay_network) ? payMethod(row.pay_currency, row.pay_network) : undefined;
  if (!method) throw new Error(`invoice ${row.id} is paid in an unknown ${row.pay_currency} on ${row.pay_network}`);
  return method;
}

export function paymentToProto(row: PaymentRow): Payment {
  return create(PaymentSchema, {
    transactionHash: row.transaction_hash,
    outputIndex: row.output_index,
    amount: formatPlain(row.amount),
    asset: row.asset,
    network: row.chain,
    confirmations: row.confirmations,
    status: row.status,
    detectedAt: timestampFromDate(row.detected_at),
    ...(row.block_number === null ? {} : { blockNumber: BigInt(row.block_number) }),
    ...(row.block_hash === null ? {} : { blockHash: row.block_hash }),
    ...(row.block_time === null ? {} : { blockTime: timestampFromDate(row.block_time) }),
  });
}

export function invoiceToProto(row: InvoiceRow, payments: readonly PaymentRow[] = []): Invoice {
  return create(InvoiceSchema, {
    id: row.id,
    ...(row.order_id === null ? {} : { orderId: row.order_id }),
    ...(row.order_description === null ? {} : { orderDescription: row.order_description }),
    priceAmount: fiatAmount(row.price_amount, row.price_currency),
    priceAmountInUsd: formatFixed(new Decimal(row.price_amount_in_usd), 2),
    amountReceived: formatPlain(row.amount_received),
    priceCurrency: row.price_currency,
    payCurrency: row.pay_currency,
    payNetwork: row.pay_network,
    status: INVOICE_STATUS.toProto(row.status),
    createdAt: timestampFromDate(row.created_at),
    expiredAt: timestampFromDate(row.expired_at),
    address: row.address,
    amountExpected: formatPlain(row.amount_expected),
    successUrl: row.success_url,
    cancelUrl: row.cancel_url,
    projectName: row.project_name,
    isDonation: row.is_donation,
    projectId: row.project_id,
    environment: environmentToProto(row.environment),
    ...(row.transaction_hash === null ? {} : { transactionHash: row.transaction_hash }),
    ...(row.paid_at === null ? {} : { paidAt: timestampFromDate(row.paid_at) }),
    rate: formatPlain(row.rate),
    rateSources: row.rate_sources,
    ...(row.rate_quoted_at === null ? {} : { rateQuotedAt: timestampFromDate(row.rate_quoted_at) }),
    payments: payments.map(paymentToProto),
    confirmationsRequired: row.confirmations_required,
    paymentTolerancePercent: formatPlain(row.payment_tolerance_percent),
  });
}

/**
 * Only what the customer's checkout page needs: no order id/description, project or merchant data.
 * `target` is the contract and chain id the invoice is paid to (PayMethodCatalog.paymentTarget:
 * the configured ones for a live invoice, so the QR code names what the watcher watches).
 */
export function checkoutToProto(row: InvoiceRow, payments: readonly PaymentRow[], target: PaymentTarget): Checkout {
  const method = payMethodOf(row);
  const contract = method.token ? target.contract : null;
  const counting = payments.filter((p) => paysInvoice(invoiceFacts(row), paymentFacts(p)) && isLivePayment(p.status));
  const { amountRemaining } = deriveInvoiceState(invoiceFacts(row), payments.map(paymentFacts), row.expired_at);
  // The wallet is asked for what is still missing: a customer who scans again after a partial
  // payment must not send the whole price once more (an outside review's overpayment).
  const asked = amountRemaining.gt(0) ? amountRemaining : new Decimal(row.amount_expected);
  return create(CheckoutSchema, {
    id: row.id,
    status: INVOICE_STATUS.toProto(row.status),
    payCurrency: row.pay_currency,
    amountExpected: formatPlain(row.amount_expected),
    address: row.address,
    priceAmount: fiatAmount(row.price_amount, row.price_currency),
    priceCurrency: row.price_currency,
    expiredAt: timestampFromDate(row.expired_at),
    createdAt: timestampFromDate(row.created_at),
    amountReceived: formatPlain(row.amount_received),
    isSandbox: row.environment === 'sandbox',
    successUrl: row.success_url,
    cancelUrl: row.cancel_url,
    // The resolved entry's URI: EIP-681 with @chainId off Ethereum mainnet, tron: with &token= (chains/currencies.ts).
    paymentUri: paymentUri(method, row.address, asked, target),
    confirmationsRequired: row.confirmations_required,
    confirmations: Math.min(confirmationsOf(counting), row.confirmations_required || Number.MAX_SAFE_INTEGER),
    payNetwork: method.chain,
    payNetworkLabel: networkLabel(method.chain),
    ...(contract === null ? {} : { tokenContract: contract }),
    amountRemaining: formatPlain(amountRemaining.toFixed()),
  });
}

/** The fewest confirmations among payments still counting: how far the invoice is from Paid. */
function confirmationsOf(payments: readonly PaymentRow[]): number {
  return payments.length === 0 ? 0 : Math.min(...payments.map((p) => p.confirmations));
}
