import { Type, type Static } from '@sinclair/typebox';
import { CursorParam, LimitParam, patternString, Timestamp, Uuid } from './common';

export const InvoiceStatusName = Type.Union(
  [Type.Literal('Waiting'), Type.Literal('Confirming'), Type.Literal('PartiallyPaid'), Type.Literal('Paid'), Type.Literal('Expired')],
  { description: 'Waiting, Paid and Expired in the sandbox; live invoices also pass through PartiallyPaid and Confirming' },
);

/** An amount's exact decimal string, beside a number field a double may not carry exactly. */
export const ExactDecimal = (field: string) =>
  Type.String({ pattern: '^-?\\d+(\\.\\d+)?$', description: `${field} exactly, as a decimal string with the asset's full precision (e.g. 18 decimals for ETH)` });

export const PAYMENT_TRANSACTION_DESCRIPTION =
  'The transaction that carried the payment; `reconciled:<block hash>:<address>` for money found by balance reconciliation (an internal transfer, e.g. from a contract wallet, which no transaction names: docs/watcher.md#reconciled-payments)';

export const PaymentSchema = Type.Object(
  {
    transactionHash: Type.String({ description: PAYMENT_TRANSACTION_DESCRIPTION }),
    amount: Type.Number({ description: 'In asset (the nearest JSON number; see amountDecimal)' }),
    amountDecimal: ExactDecimal('amount'),
    asset: Type.String({ description: 'What was sent: the invoice’s payCurrency, or another token (recorded, not credited)' }),
    network: Type.String({
      description: 'The network it arrived on: the invoice’s payNetwork, or another EVM network (a wrong-network payment: recorded, not credited; docs/networks.md)',
    }),
    confirmations: Type.Integer({ minimum: 0 }),
    status: Type.Union(
      [Type.Literal('seen'), Type.Literal('confirmed'), Type.Literal('final'), Type.Literal('orphaned'), Type.Literal('replaced')],
      { description: 'seen (fewer confirmations than required), confirmed, final, orphaned (its block left the chain), replaced (dropped or double-spent)' },
    ),
    detectedAt: Timestamp,
  },
  { additionalProperties: false },
);

const HttpUrl = (description: string) => Type.String({ maxLength: 2048, description });

export const CreateInvoiceBody = Type.Object(
  {
    priceAmount: Type.String({ maxLength: 64, description: 'Price as a decimal string in priceCurrency, e.g. "19.90" (JPY: no decimals)' }),
    priceCurrency: Type.String({ maxLength: 16, description: 'Fiat ISO code: USD, EUR, GBP, JPY, CHF, CAD, AUD' }),
    payCurrency: Type.String({ maxLength: 16, description: 'The asset: BTC, LTC, ETH, USDT, USDC, TRX, POL, BNB' }),
    payNetwork: Type.Optional(
      Type.String({
        maxLength: 32,
        description:
          'The network to pay on: bitcoin, litecoin, ethereum, base, arbitrum, optimism, polygon, bsc, tron (GET /api/currencies lists the pairs taken). ' +
          'Default: the asset’s own network (BTC bitcoin, LTC litecoin, ETH/USDT/USDC ethereum, TRX tron, POL polygon, BNB bsc). A network that does not carry ' +
          'the asset, or is not enabled, is 400 naming the networks that carry it',
      }),
    ),
    successUrl: HttpUrl('Where the checkout page sends the customer after payment'),
    cancelUrl: HttpUrl('Where the checkout page sends the customer who gives up, or when the invoice expires'),
    orderId: Type.Optional(Type.String({ maxLength: 255, description: 'Your own order reference' })),
    orderDescription: Type.Optional(Type.String({ maxLength: 1000 })),
    isDonation: Type.Optional(Type.Boolean({ description: 'false when omitted' })),
    projectId: Type.Optional(
      Type.String({
        format: 'uuid',
        description: 'The project (the dashboard creates invoices this way). Required with a merchant JWT; with an x-api-key it may be left out (it must then be the key’s project)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type CreateInvoiceBody = Static<typeof CreateInvoiceBody>;

export const InvoiceSchema = Type.Object(
  {
    id: Uuid,
    orderId: Type.String({ description: 'Echoed from the request ("" when none was given)' }),
    orderDescription: Type.String({ description: 'Echoed from the request ("" when none was given)' }),
    priceAmount: Type.Number(),
    priceAmountInUsd: Type.Number(),
    amountReceived: Type.Number(),
    priceCurrency: Type.String(),
    payCurrency: Type.String(),
    payNetwork: Type.String({ description: 'The network payCurrency is paid on (bitcoin, litecoin, ethereum, base, arbitrum, optimism, polygon, bsc, tron)' }),
    status: InvoiceStatusName,
    createdAt: Timestamp,
    expiredAt: Timestamp,
    address: Type.String(),
    amountExpected: Type.Number(),
    successUrl: Type.String(),
    cancelUrl: Type.String(),
    projectName: Type.String(),
    isDonation: Type.Boolean(),
    amountExpectedDecimal: Type.Optional(ExactDecimal('Live invoices only: amountExpected')),
    amountReceivedDecimal: Type.Optional(ExactDecimal('Live invoices only: amountReceived')),
    payments: Type.Optional(Type.Array(PaymentSchema, { description: 'Live invoices only: transfers to the address seen on chain, oldest first' })),
    confirmationsRequired: Type.Optional(
      Type.Integer({ minimum: 1, description: 'Live invoices only: confirmations a payment needs before the invoice is Paid' }),
    ),
  },
  { $id: 'Invoice' },
);

/** How the invoice was priced, for the merchant (the dashboard's invoice page); not in the public invoice. */
export const InvoicePricingSchema = Type.Object(
  {
    rate: Type.Number({ description: 'Price of one payCurrency unit in priceCurrency, fixed at creation: amountExpected = priceAmount / rate, rounded up (for amounts of more than 10^12 base units, where a rate of 15 significant digits is too coarse, to within 10^-14 of the amount; amountExpected itself is always the smallest amount worth the price, and amountExpected × rate covers priceAmount)' }),
    rateSources: Type.Array(Type.String(), {
      description: 'Where the rate came from: the providers whose quotes made it (coinbase, kraken; the median of fresh quotes) or static (the rate table)',
    }),
    rateQuotedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'Time of the oldest quote behind the rate (null for a static table without a date)',
    }),
  },
  { additionalProperties: false },
);

export const MerchantInvoiceSchema = Type.Object({ ...InvoiceSchema.properties, pricing: InvoicePricingSchema }, { $id: 'MerchantInvoice' });

export const SandboxPayBody = Type.Optional(
  Type.Object(
    {
      amountReceived: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'Default: the invoice’s amountExpected; at most 8 decimals' })),
      transactionHash: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'Default: a random 64-hex hash' })),
    },
    { additionalProperties: false },
  ),
);
export type SandboxPayBody = Static<typeof SandboxPayBody>;

export const InvoiceListQuery = Type.Object(
  {
    status: Type.Optional(InvoiceStatusName),
    orderId: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'Only invoices with exactly this order id' })),
    limit: LimitParam,
    cursor: CursorParam,
  },
  { additionalProperties: false },
);
export type InvoiceListQuery = Static<typeof InvoiceListQuery>;

export const InvoiceListSchema = Type.Object({
  items: Type.Array(InvoiceSchema),
  nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'null on the last page' }),
});

export const IdempotencyKeyHeaders = Type.Object({
  // Every rule of the key (services/runtime/src/idempotency.ts) at the edge, so each refusal names
  // the header alike (printable ASCII was the service's, named after its proto field).
  'idempotency-key': Type.Optional(
    patternString('^[\\x20-\\x7e]+$', 'must be printable ASCII', { minLength: 1, maxLength: 255, description: 'Replays the first response for the same body within 24 h' }),
  ),
});
