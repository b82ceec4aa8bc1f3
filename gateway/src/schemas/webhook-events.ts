/**
 * The bodies of the webhooks the notifier sends, documented in the OpenAPI `webhooks` section.
 * The notifier's payload table (services/notifier/src/domain/payloads.ts) produces them; the
 * webhook tests validate real deliveries against these schemas, so the two cannot drift.
 */
import { Type, type TSchema } from '@sinclair/typebox';
import { ExactDecimal, PAYMENT_TRANSACTION_DESCRIPTION } from './invoice';

const Environment = Type.Union([Type.Literal('live'), Type.Literal('sandbox')]);
const Uuid = Type.String({ format: 'uuid' });
/**
 * An addition every body ends with (after the documented fields, which stay exactly as they are):
 * retries can bring an older event after a newer one, so receivers order by it.
 */
const OccurredAt = Type.String({
  format: 'date-time',
  description:
    'When the event happened (ISO 8601 UTC, milliseconds). Events of one invoice or payout: the later occurredAt is the newer state; an older event arriving after a newer one (it was retried) must not undo it',
});

/**
 * An addition to every invoice body (issue 24, docs/networks.md), after the type's documented
 * fields and before occurredAt: the network the invoice is paid on.
 */
const PayNetwork = Type.String({
  description: 'The invoice’s payNetwork: the network its payCurrency is paid on (bitcoin, litecoin, ethereum, base, arbitrum, optimism, polygon, bsc, tron)',
});

export const InvoicePaidWebhook = Type.Object(
  {
    invoiceId: Uuid,
    orderId: Type.String({ description: 'The invoice’s orderId ("" when none was given)' }),
    status: Type.Literal('Paid'),
    amount: Type.Number({ description: 'The amount received, in currency' }),
    currency: Type.String({ description: 'The invoice’s payCurrency' }),
    environment: Environment,
    // An addition (after the documented fields): a live payment may carry 18 decimals (ETH),
    // more than a JSON parser's double keeps of `amount` (an outside review).
    amountDecimal: ExactDecimal('amount'),
    payNetwork: PayNetwork,
    occurredAt: OccurredAt,
  },
  { additionalProperties: false },
);

export const InvoiceExpiredWebhook = Type.Object(
  {
    invoiceId: Uuid,
    orderId: Type.String(),
    status: Type.Literal('Expired'),
    currency: Type.String(),
    environment: Environment,
    payNetwork: PayNetwork,
    occurredAt: OccurredAt,
  },
  { additionalProperties: false },
);

/** The invoice.paid keys followed by what is particular to the event, payNetwork, then `tail` (late_payment's network). */
function invoiceWebhook<Extra extends Record<string, TSchema>, Tail extends Record<string, TSchema>>(status: TSchema, extra: Extra, tail?: Tail) {
  return Type.Object(
    {
      invoiceId: Uuid,
      orderId: Type.String(),
      status,
      amount: Type.Number(),
      currency: Type.String(),
      environment: Environment,
      ...extra,
      payNetwork: PayNetwork,
      ...tail,
      occurredAt: OccurredAt,
    },
    { additionalProperties: false },
  );
}

/** A live-only invoice webhook: invoice.paid's keys, the amount's exact decimal string, then the event's own. */
function liveInvoiceWebhook<Extra extends Record<string, TSchema>, Tail extends Record<string, TSchema>>(status: TSchema, extra: Extra, tail?: Tail) {
  return invoiceWebhook(status, { amountDecimal: ExactDecimal('amount'), ...extra }, tail);
}

const LiveStatus = Type.Union([Type.Literal('Waiting'), Type.Literal('PartiallyPaid'), Type.Literal('Confirming'), Type.Literal('Paid'), Type.Literal('Expired')]);

export const InvoiceConfirmingWebhook = liveInvoiceWebhook(Type.Literal('Confirming'), {
  confirmations: Type.Integer({ description: 'The fewest confirmations among the payments counting' }),
  confirmationsRequired: Type.Integer(),
});
export const InvoicePartiallyPaidWebhook = liveInvoiceWebhook(Type.Literal('PartiallyPaid'), {
  amountRemaining: Type.Number({ description: 'What is still missing, in currency' }),
  amountRemainingDecimal: ExactDecimal('amountRemaining'),
});
export const InvoiceLatePaymentWebhook = liveInvoiceWebhook(LiveStatus, {
  transactionHash: Type.String({ description: PAYMENT_TRANSACTION_DESCRIPTION }),
  credited: Type.Boolean({ description: 'false for another asset, or the asset on another network, sent to the address: recorded, not credited' }),
}, {
  network: Type.String({
    description: 'The network this payment arrived on: the invoice’s payNetwork, or another EVM network (a wrong-network payment, credited false; the same address exists on every EVM network)',
  }),
});
export const InvoiceReopenedWebhook = liveInvoiceWebhook(LiveStatus, {
  previousStatus: LiveStatus,
});

/** Every payout webhook: the payout, its new status, amount, coin and environment, what is particular to the event, then its network (issue 24). */
function payoutWebhook<S extends string, Extra extends Record<string, TSchema>>(status: S, extra: Extra) {
  return Type.Object(
    {
      payoutId: Uuid,
      status: Type.Literal(status),
      amount: Type.Number({ description: 'The payout’s amount, in currency' }),
      currency: Type.String({ description: 'Coin code' }),
      environment: Environment,
      ...extra,
      network: Type.String({
        description: 'The network the payout is sent on (bitcoin, litecoin, ethereum, base, arbitrum, optimism, polygon, bsc, tron): its balance is that (currency, network)’s',
      }),
      occurredAt: OccurredAt,
    },
    { additionalProperties: false },
  );
}

export const PayoutRequestedWebhook = payoutWebhook('AwaitingVerification', {});
export const PayoutVerifiedWebhook = payoutWebhook('Pending', {
  origin: Type.Union([Type.Literal('merchant'), Type.Literal('auto_sweep')], {
    description:
      'merchant: confirmed with the emailed code after payout.requested; auto_sweep: created verified by the project’s auto-sweep configuration (no payout.requested precedes it)',
  }),
});
export const PayoutCompletedWebhook = payoutWebhook('Completed', {
  transactionHash: Type.String({ description: 'The on-chain transaction that sent the funds' }),
});
export const PayoutRejectedWebhook = payoutWebhook('Rejected', {
  adminNote: Type.Union([Type.String(), Type.Null()], { description: 'The operator’s reason' }),
});
export const PayoutCancelledWebhook = payoutWebhook('Cancelled', {
  reason: Type.Union([Type.Literal('user'), Type.Literal('attempts_exhausted'), Type.Literal('code_expired')], {
    description: 'user: cancelled through the API; attempts_exhausted: 5 wrong verification codes; code_expired: not verified within 15 minutes',
  }),
});

export const WEBHOOK_EVENTS: Record<string, { summary: string; body: TSchema }> = {
  'invoice.paid': { summary: 'An invoice was paid (in the sandbox: a simulated payment)', body: InvoicePaidWebhook },
  'invoice.expired': { summary: 'An unpaid invoice passed its expiredAt', body: InvoiceExpiredWebhook },
  'invoice.confirming': { summary: 'Live: payments covering the price are on chain, awaiting confirmations', body: InvoiceConfirmingWebhook },
  'invoice.partially_paid': { summary: 'Live: less than the price was received (amount so far, amountRemaining)', body: InvoicePartiallyPaidWebhook },
  'invoice.late_payment': {
    summary: 'Live: a confirmed payment invoice.paid did not include (after expiry, after Paid, another asset, or another network); amount, currency and network are the payment’s',
    body: InvoiceLatePaymentWebhook,
  },
  'invoice.reopened': { summary: 'Live: a chain reorg removed payments before Paid; status is where the invoice moved back to', body: InvoiceReopenedWebhook },
  'payout.requested': { summary: 'A payout was requested and its amount held; it awaits the emailed code', body: PayoutRequestedWebhook },
  'payout.verified': {
    summary: 'A payout is verified (Pending) and waits to be sent: confirmed with its code, or created by the project’s auto-sweep',
    body: PayoutVerifiedWebhook,
  },
  'payout.completed': { summary: 'A payout was sent on chain (Completed); its amount left the balance', body: PayoutCompletedWebhook },
  'payout.rejected': { summary: 'An operator refused a payout (Rejected); its amount is available again', body: PayoutRejectedWebhook },
  'payout.cancelled': { summary: 'A payout was cancelled; its amount is available again', body: PayoutCancelledWebhook },
};
