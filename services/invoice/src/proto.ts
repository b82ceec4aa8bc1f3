/**
 * Rows to protobuf messages and proto enums to domain names. Amounts leave as decimal strings:
 * fiat prices with their currency's minor units ("19.90", "1500" for JPY), priceAmountInUsd with
 * cents, crypto amounts in canonical plain form ("0.00018096", "0").
 */
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import {
  CheckoutSchema,
  InvoiceSchema,
  InvoiceStatus,
  type Checkout,
  type Invoice,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import {
  Decimal,
  cryptoCurrency,
  fiatCurrency,
  formatFixed,
  formatPlain,
  isCryptoCode,
  isFiatCode,
  networkOf,
  paymentUri,
  type InvoiceStatusName,
  type ProjectEnvironment,
} from './domain';
import type { InvoiceRow } from './store/invoices';

const STATUS_TO_PROTO: Readonly<Record<InvoiceStatusName, InvoiceStatus>> = {
  Waiting: InvoiceStatus.WAITING,
  Paid: InvoiceStatus.PAID,
  Expired: InvoiceStatus.EXPIRED,
};

export function statusToProto(status: InvoiceStatusName): InvoiceStatus {
  return STATUS_TO_PROTO[status];
}

/** The public name of a proto status; undefined for UNSPECIFIED or an unknown number. */
export function statusFromProto(status: InvoiceStatus): InvoiceStatusName | undefined {
  return (Object.keys(STATUS_TO_PROTO) as InvoiceStatusName[]).find((name) => STATUS_TO_PROTO[name] === status);
}

export function environmentToProto(environment: ProjectEnvironment): Environment {
  return environment === 'sandbox' ? Environment.SANDBOX : Environment.LIVE;
}

/** 'live' | 'sandbox', or undefined for UNSPECIFIED and unknown values. */
export function environmentFromProto(environment: Environment): ProjectEnvironment | undefined {
  if (environment === Environment.LIVE) return 'live';
  if (environment === Environment.SANDBOX) return 'sandbox';
  return undefined;
}

function fiatAmount(amount: string, currency: string): string {
  if (!isFiatCode(currency)) throw new Error(`stored invoice has unknown price currency ${currency}`);
  return formatFixed(new Decimal(amount), fiatCurrency(currency).minorUnits);
}

function cryptoAmount(amount: string): string {
  return formatPlain(new Decimal(amount));
}

export function invoiceToProto(row: InvoiceRow): Invoice {
  return create(InvoiceSchema, {
    id: row.id,
    ...(row.order_id === null ? {} : { orderId: row.order_id }),
    ...(row.order_description === null ? {} : { orderDescription: row.order_description }),
    priceAmount: fiatAmount(row.price_amount, row.price_currency),
    priceAmountInUsd: formatFixed(new Decimal(row.price_amount_in_usd), 2),
    amountReceived: cryptoAmount(row.amount_received),
    priceCurrency: row.price_currency,
    payCurrency: row.pay_currency,
    status: statusToProto(row.status),
    createdAt: timestampFromDate(row.created_at),
    expiredAt: timestampFromDate(row.expired_at),
    address: row.address,
    amountExpected: cryptoAmount(row.amount_expected),
    successUrl: row.success_url,
    cancelUrl: row.cancel_url,
    projectName: row.project_name,
    isDonation: row.is_donation,
    projectId: row.project_id,
    environment: environmentToProto(row.environment),
    ...(row.transaction_hash === null ? {} : { transactionHash: row.transaction_hash }),
    ...(row.paid_at === null ? {} : { paidAt: timestampFromDate(row.paid_at) }),
    rate: cryptoAmount(row.rate),
  });
}

/** Only what the customer's checkout page needs: no order id/description, project or merchant data. */
export function checkoutToProto(row: InvoiceRow): Checkout {
  if (!isCryptoCode(row.pay_currency)) throw new Error(`stored invoice has unknown pay currency ${row.pay_currency}`);
  const coin = cryptoCurrency(row.pay_currency);
  return create(CheckoutSchema, {
    id: row.id,
    status: statusToProto(row.status),
    payCurrency: row.pay_currency,
    amountExpected: cryptoAmount(row.amount_expected),
    address: row.address,
    priceAmount: fiatAmount(row.price_amount, row.price_currency),
    priceCurrency: row.price_currency,
    expiredAt: timestampFromDate(row.expired_at),
    createdAt: timestampFromDate(row.created_at),
    amountReceived: cryptoAmount(row.amount_received),
    isSandbox: row.environment === 'sandbox',
    successUrl: row.success_url,
    cancelUrl: row.cancel_url,
    paymentUri: paymentUri(coin, networkOf(row.environment), row.address, new Decimal(row.amount_expected)),
  });
}
