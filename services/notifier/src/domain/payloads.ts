/**
 * Which events become webhooks, and the exact body each one sends (docs/webhook-events.md).
 *
 * One explicit table covers every event the services publish, so a new event type cannot become
 * a webhook by accident: an event missing from the table is "not a webhook" (fail closed), and a
 * test checks the table against the event messages in the protos.
 *
 * Bodies are flat, in the style of the documented invoice.paid body (the six keys of the seed, then additions). Most event
 * types have a distinct `status`; late_payment and reopened carry the invoice's status and are
 * told apart by their own keys (transactionHash/credited, previousStatus):
 *
 *   invoice.paid      {invoiceId, orderId, status:"Paid", amount, currency, environment, amountDecimal, payNetwork}
 *                     (orderId "" when the merchant gave none, as the public Invoice has it)
 *   invoice.expired   {invoiceId, orderId, status:"Expired", currency, environment, payNetwork}
 *                     (no amount: the event carries none; late or partial money comes as late_payment)
 *   invoice.confirming     {invoiceId, orderId, status:"Confirming", amount, currency, environment,
 *                           amountDecimal, confirmations, confirmationsRequired, payNetwork}
 *   invoice.partially_paid {invoiceId, orderId, status:"PartiallyPaid", amount, currency, environment,
 *                           amountDecimal, amountRemaining, amountRemainingDecimal, payNetwork}
 *   invoice.late_payment   {invoiceId, orderId, status, amount, currency, environment,
 *                           amountDecimal, transactionHash, credited, payNetwork, network}
 *                           (status: the invoice's; amount/currency/network: this payment's;
 *                           credited false for another asset or another network)
 *   invoice.reopened       {invoiceId, orderId, status, amount, currency, environment, amountDecimal,
 *                           previousStatus, payNetwork}
 *   (payNetwork, and late_payment's network, are additions of issue 24: docs/networks.md)
 *   (the live-only events repeat their amounts as exact decimal strings: docs/accounting.md)
 *                           (a reorg removed payments before Paid; status is where it moved back to)
 *   payout.requested  {payoutId, status:"AwaitingVerification", amount, currency, environment, network}
 *   payout.verified   {payoutId, status:"Pending", amount, currency, environment, origin, network}
 *                     (origin "merchant" | "auto_sweep": an auto-sweep payout starts here, no payout.requested)
 *   payout.completed  {payoutId, status:"Completed", amount, currency, environment, transactionHash, network}
 *   payout.rejected   {payoutId, status:"Rejected", amount, currency, environment, adminNote, network}
 *                     (adminNote null when the operator left it empty)
 *   payout.cancelled  {payoutId, status:"Cancelled", amount, currency, environment, reason, network}
 *                     (reason "user" | "attempts_exhausted" | "code_expired")
 *   (a payout's network is an addition of issue 24, like payNetwork)
 *
 * Every body ends with `occurredAt` (an addition to the seed's fields, after them): when the
 * event was written by its producer, ISO 8601 UTC with milliseconds. Events of one invoice or
 * payout are written under its row lock, so a later occurredAt is a later state: receivers order
 * by it, since a retried event may arrive after a newer one (docs/webhook-delivery.md).
 *
 * Keys are always present for their type (orderId "" and adminNote null, never missing), and
 * appear in the order above. Event types are "<owning service>.<name>": the first token names the
 * stream (`<ns>.<service>.>`) the event travels in. `amount` is a JSON number written from the event's decimal string digit for
 * digit (see decimalAsJsonNumber), never through a float.
 *
 * The body is returned as the exact string to sign, send and store: serialising it again
 * anywhere else could change the bytes and break the signature.
 */
import { fromJson, isMessage, type DescMessage, type JsonValue, type Message } from '@bufbuild/protobuf';
import type { GenMessage } from '@bufbuild/protobuf/codegenv2';
import { decimalAsJsonNumber } from '@coinvoice/domain/json-money';
import { ApiKeyRevokedSchema, ProjectUpdatedSchema, SessionsRevokedSchema } from '@coinvoice/runtime/gen/coinvoice/auth/v1/events_pb';
import {
  InvoiceConfirmingSchema,
  InvoiceExpiredSchema,
  InvoiceLatePaymentSchema,
  InvoicePaidSchema,
  InvoicePartiallyPaidSchema,
  InvoiceReopenedSchema,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { WebhookDeliveryFailedSchema } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/events_pb';
import {
  PayoutCancelledSchema,
  PayoutCompletedSchema,
  PayoutRejectedSchema,
  PayoutRequestedSchema,
  PayoutVerificationCodeIssuedSchema,
  PayoutVerifiedSchema,
} from '@coinvoice/runtime/gen/coinvoice/payout/v1/events_pb';

/** An event payload the table cannot map: a producer bug, never silently sent. */
export class MalformedEventError extends Error {
  constructor(
    readonly eventType: string,
    detail: string,
  ) {
    super(`malformed ${eventType} event: ${detail}`);
    this.name = 'MalformedEventError';
  }
}

/** A decimal amount that the body writes as a JSON number token, exactly as `digits` spells it. */
export class JsonDecimal {
  private constructor(readonly digits: string) {}
  /** @throws Error when `decimal` is not a plain decimal (see decimalAsJsonNumber). */
  static of(decimal: string): JsonDecimal {
    return new JsonDecimal(decimalAsJsonNumber(decimal));
  }
}

export type WebhookFieldValue = string | boolean | null | JsonDecimal;
export type WebhookFields = Readonly<Record<string, WebhookFieldValue>>;

export type WebhookMapping =
  | {
      kind: 'webhook';
      /** The project whose endpoint receives it. */
      projectId: string;
      /** The exact JSON text to sign, send and store. */
      body: string;
    }
  | { kind: 'not_a_webhook'; reason: string };

interface WebhookRule {
  kind: 'webhook';
  schema: DescMessage;
  map(eventType: string, message: Message): { projectId: string; fields: WebhookFields };
}
interface InternalRule {
  kind: 'not_a_webhook';
  schema: DescMessage;
  reason: string;
}
export type EventRule = WebhookRule | InternalRule;

/** A table row that maps `schema`'s message to body fields (typed by the schema). */
function webhook<Event extends Message & { projectId: string }>(
  schema: GenMessage<Event>,
  fields: (event: Event, read: FieldReader) => WebhookFields,
): WebhookRule {
  return {
    kind: 'webhook',
    schema,
    map(eventType, message) {
      if (!isMessage(message, schema)) {
        throw new MalformedEventError(eventType, `expected ${schema.typeName}, got ${message.$typeName}`);
      }
      const read = fieldReader(eventType);
      return { projectId: read.required('projectId', message.projectId), fields: fields(message, read) };
    },
  };
}

function internal(schema: DescMessage, reason: string): InternalRule {
  return { kind: 'not_a_webhook', schema, reason };
}

/** Every published event type: how (or whether) it becomes a webhook. */
export const EVENT_WEBHOOK_TABLE = {
  'invoice.paid': webhook(InvoicePaidSchema, (e, read) => ({ ...amountWithDigits(invoiceBase(e, read)), payNetwork: payNetworkOf(e, read) })),
  'invoice.expired': webhook(InvoiceExpiredSchema, (e, read) => ({
    invoiceId: read.required('invoiceId', e.invoiceId),
    orderId: e.orderId ?? '',
    status: read.required('status', e.status),
    currency: read.required('currency', e.currency),
    environment: read.environment(e.environment),
    payNetwork: payNetworkOf(e, read),
  })),
  'invoice.confirming': webhook(InvoiceConfirmingSchema, (e, read) => ({
    ...liveInvoiceBase(e, read),
    confirmations: JsonDecimal.of(String(e.confirmations)),
    confirmationsRequired: JsonDecimal.of(String(e.confirmationsRequired)),
    payNetwork: payNetworkOf(e, read),
  })),
  'invoice.partially_paid': webhook(InvoicePartiallyPaidSchema, (e, read) => {
    const amountRemaining = read.amount('amountRemaining', e.amountRemaining);
    return { ...liveInvoiceBase(e, read), amountRemaining, amountRemainingDecimal: amountRemaining.digits, payNetwork: payNetworkOf(e, read) };
  }),
  'invoice.late_payment': webhook(InvoiceLatePaymentSchema, (e, read) => {
    const payNetwork = payNetworkOf(e, read);
    return {
      ...liveInvoiceBase(e, read),
      transactionHash: read.required('transactionHash', e.transactionHash),
      credited: e.credited,
      payNetwork,
      // Events from before networks name none: the payment arrived where the invoice was paid.
      network: e.network === '' ? payNetwork : networkName(read, 'network', e.network),
    };
  }),
  'invoice.reopened': webhook(InvoiceReopenedSchema, (e, read) => ({
    ...liveInvoiceBase(e, read),
    previousStatus: read.required('previousStatus', e.previousStatus),
    payNetwork: payNetworkOf(e, read),
  })),
  'payout.requested': webhook(PayoutRequestedSchema, (e, read) => ({ ...payoutBase(e, read), network: payoutNetworkOf(e, read) })),
  'payout.verification_code_issued': internal(
    PayoutVerificationCodeIssuedSchema,
    'internal: carries the plain verification code and the merchant email; it is emailed, never sent to a URL',
  ),
  'payout.verified': webhook(PayoutVerifiedSchema, (e, read) => ({
    ...payoutBase(e, read),
    // Events from before issue 23 carry none: those payouts were all the merchant's.
    origin: e.origin === '' ? 'merchant' : read.oneOf('origin', e.origin, ['merchant', 'auto_sweep'] as const),
    network: payoutNetworkOf(e, read),
  })),
  'payout.completed': webhook(PayoutCompletedSchema, (e, read) => ({
    ...payoutBase(e, read),
    transactionHash: read.required('transactionHash', e.transactionHash),
    network: payoutNetworkOf(e, read),
  })),
  'payout.rejected': webhook(PayoutRejectedSchema, (e, read) => ({
    ...payoutBase(e, read),
    adminNote: e.adminNote === '' ? null : e.adminNote,
    network: payoutNetworkOf(e, read),
  })),
  'payout.cancelled': webhook(PayoutCancelledSchema, (e, read) => ({
    ...payoutBase(e, read),
    reason: read.required('reason', e.reason),
    network: payoutNetworkOf(e, read),
  })),
  'notifier.webhook_delivery_failed': internal(
    WebhookDeliveryFailedSchema,
    'internal: operator alerting; a webhook about failed webhooks would feed on itself',
  ),
  'auth.api_key_revoked': internal(ApiKeyRevokedSchema, 'internal: gateway cache invalidation'),
  'auth.project_updated': internal(ProjectUpdatedSchema, 'internal: cache invalidation of project settings'),
  'auth.sessions_revoked': internal(SessionsRevokedSchema, 'internal: gateways refuse the merchant\'s older session tokens'),
} as const satisfies Record<string, EventRule>;

export type PublishedEventType = keyof typeof EVENT_WEBHOOK_TABLE;
export type WebhookEventType = {
  [T in PublishedEventType]: (typeof EVENT_WEBHOOK_TABLE)[T]['kind'] extends 'webhook' ? T : never;
}[PublishedEventType];

export function isWebhookEventType(eventType: string): eventType is WebhookEventType {
  return ruleFor(eventType)?.kind === 'webhook';
}

/**
 * The webhook for an event as it travels on the bus (the producer's `toJson` payload).
 * Unknown fields are ignored so producers can add fields without breaking the notifier.
 * @throws MalformedEventError when the payload does not fit the event's message.
 */
export function webhookForEventJson(eventType: string, payload: JsonValue, occurredAt: Date): WebhookMapping {
  const rule = ruleFor(eventType);
  if (rule === undefined) return unknownEventType(eventType);
  if (rule.kind === 'not_a_webhook') return { kind: 'not_a_webhook', reason: rule.reason };
  let message: Message;
  try {
    message = fromJson(rule.schema, payload, { ignoreUnknownFields: true });
  } catch (error) {
    throw new MalformedEventError(eventType, error instanceof Error ? error.message : String(error));
  }
  return toWebhook(eventType, rule, message, occurredAt);
}

/** The webhook for an already decoded event message. */
export function webhookForEventMessage(eventType: string, message: Message, occurredAt: Date): WebhookMapping {
  const rule = ruleFor(eventType);
  if (rule === undefined) return unknownEventType(eventType);
  if (rule.kind === 'not_a_webhook') return { kind: 'not_a_webhook', reason: rule.reason };
  return toWebhook(eventType, rule, message, occurredAt);
}

/**
 * Serialises body fields in their own key order: strings and null as JSON.stringify writes them,
 * JsonDecimal as its digits. Same fields, same bytes.
 */
export function serializeWebhookBody(fields: WebhookFields): string {
  const members = Object.entries(fields).map(([key, value]) => {
    const json = value instanceof JsonDecimal ? value.digits : JSON.stringify(value);
    return `${JSON.stringify(key)}:${json}`;
  });
  return `{${members.join(',')}}`;
}

interface FieldReader {
  /** A string field that must not be empty (proto3 cannot tell empty from absent). */
  required(name: string, value: string): string;
  amount(name: string, value: string): JsonDecimal;
  environment(value: string): 'live' | 'sandbox';
  oneOf<const T extends string>(name: string, value: string, allowed: readonly T[]): T;
  /** A string field of a given form (`expected` names it in the error). */
  matching(name: string, value: string, pattern: RegExp, expected: string): string;
}

function fieldReader(eventType: string): FieldReader {
  const fail = (detail: string): never => {
    throw new MalformedEventError(eventType, detail);
  };
  return {
    required: (name, value) => (value !== '' ? value : fail(`${name} is missing`)),
    amount(name, value) {
      try {
        return JsonDecimal.of(value);
      } catch {
        return fail(`${name} ${JSON.stringify(value.slice(0, 40))} is not a decimal`);
      }
    },
    environment: (value) =>
      value === 'live' || value === 'sandbox' ? value : fail(`environment ${JSON.stringify(value)} is not live|sandbox`),
    matching: (name, value, pattern, expected) => (pattern.test(value) ? value : fail(`${name} ${JSON.stringify(value.slice(0, 40))} is not ${expected}`)),
    oneOf: <const T extends string>(name: string, value: string, allowed: readonly T[]): T =>
      (allowed as readonly string[]).includes(value) ? (value as T) : fail(`${name} ${JSON.stringify(value.slice(0, 40))} is not ${allowed.join('|')}`),
  };
}

interface InvoiceEventFields {
  invoiceId: string;
  orderId?: string;
  status: string;
  amount: string;
  currency: string;
  environment: string;
}

/** The invoice.paid keys, in its order: every invoice webhook with an amount starts with them. */
function invoiceBase(e: InvoiceEventFields, read: FieldReader) {
  return {
    invoiceId: read.required('invoiceId', e.invoiceId),
    orderId: e.orderId ?? '',
    status: read.required('status', e.status),
    amount: read.amount('amount', e.amount),
    currency: read.required('currency', e.currency),
    environment: read.environment(e.environment),
  };
}

/**
 * The live-only invoice webhooks: invoice.paid's keys, the amount again as its exact decimal string
 * (docs/accounting.md): a live amount can carry more digits than a JSON parser's double.
 */
function liveInvoiceBase(e: InvoiceEventFields, read: FieldReader) {
  return amountWithDigits(invoiceBase(e, read));
}

/** A body's keys, then `amountDecimal`: its amount's exact digits. */
function amountWithDigits<Body extends { amount: JsonDecimal }>(body: Body): Body & { amountDecimal: string } {
  return { ...body, amountDecimal: body.amount.digits };
}

/**
 * A network name as the producers write it (docs/networks.md: "ethereum", "bsc", …). The list of
 * networks is the chain registry's (services/chains), which the notifier does not depend on: the
 * events are the producers' signed word (docs/events.md#what-is-signed), so the notifier checks only the name's form
 * and adding a network needs no change here.
 */
const NETWORK_NAME = /^[a-z][a-z0-9-]{0,31}$/;

function networkName(read: FieldReader, name: string, value: string): string {
  return read.matching(name, value, NETWORK_NAME, 'a network name (lower-case letters, digits, -)');
}

/**
 * Each asset's network before networks existed (every invoice was paid there): events written
 * before the upgrade carry no pay_network. Mirrors chains/currencies.ts DEFAULT_NETWORK for the
 * assets of that time (the same test checks it).
 */
export const NETWORK_BEFORE_NETWORKS: Readonly<Record<string, string>> = {
  BTC: 'bitcoin',
  LTC: 'litecoin',
  ETH: 'ethereum',
  USDT: 'ethereum',
  USDC: 'ethereum',
  TRX: 'tron',
};

/**
 * A network field (an addition, issue 24: an invoice's payNetwork, a payout's network): the
 * event's, or for an event written before networks its currency's only network of that time.
 */
function networkOrBefore(read: FieldReader, name: string, value: string, currency: string): string {
  if (value !== '') return networkName(read, name, value);
  const before = Object.hasOwn(NETWORK_BEFORE_NETWORKS, currency) ? NETWORK_BEFORE_NETWORKS[currency] : undefined;
  return before ?? read.required(name, value);
}

const payNetworkOf = (e: { payNetwork: string; currency: string }, read: FieldReader) => networkOrBefore(read, 'payNetwork', e.payNetwork, e.currency);
const payoutNetworkOf = (e: { network: string; currency: string }, read: FieldReader) => networkOrBefore(read, 'network', e.network, e.currency);

interface PayoutEventFields {
  payoutId: string;
  status: string;
  amount: string;
  currency: string;
  environment: string;
}

function payoutBase(e: PayoutEventFields, read: FieldReader) {
  return {
    payoutId: read.required('payoutId', e.payoutId),
    status: read.required('status', e.status),
    amount: read.amount('amount', e.amount),
    currency: read.required('currency', e.currency),
    environment: read.environment(e.environment),
  };
}

function ruleFor(eventType: string): EventRule | undefined {
  return Object.hasOwn(EVENT_WEBHOOK_TABLE, eventType)
    ? EVENT_WEBHOOK_TABLE[eventType as PublishedEventType]
    : undefined;
}

function unknownEventType(eventType: string): WebhookMapping {
  return { kind: 'not_a_webhook', reason: `unknown event type ${JSON.stringify(eventType)}: only listed events become webhooks` };
}

function toWebhook(eventType: string, rule: WebhookRule, message: Message, occurredAt: Date): WebhookMapping {
  const { projectId, fields } = rule.map(eventType, message);
  if (Number.isNaN(occurredAt.getTime())) throw new MalformedEventError(eventType, 'occurredAt is not a time');
  return { kind: 'webhook', projectId, body: serializeWebhookBody({ ...fields, occurredAt: occurredAt.toISOString() }) };
}
