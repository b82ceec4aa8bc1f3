/**
 * Test events (`coinvoice trigger <type>`, the dashboard's "send a test event"): for every webhook
 * type of the catalogue, a sample event message of that type's own schema, mapped to its body by
 * the same payload table real events go through (payloads.ts). Same keys, same order, same types
 * as a real event by construction; only the values are samples, marked as a test:
 *
 * - invoiceId / payoutId: TEST_EVENT_SUBJECT_ID (00000000-0000-4000-8000-000000000000): no invoice
 *   or payout has it (ids are random UUIDs), so a receiver that looks it up finds nothing;
 * - orderId: TEST_EVENT_ORDER_ID ("coinvoice-test-event");
 * - transactionHash: all zeros; adminNote says it is a test;
 * - environment: the project's.
 *
 * And "webhook.test", the ping without a catalogue body ({eventId, projectId, message, sentAt}).
 */
import { create, type Message } from '@bufbuild/protobuf';
import {
  InvoiceConfirmingSchema,
  InvoiceExpiredSchema,
  InvoiceLatePaymentSchema,
  InvoicePaidSchema,
  InvoicePartiallyPaidSchema,
  InvoiceReopenedSchema,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import {
  PayoutCancelledSchema,
  PayoutCompletedSchema,
  PayoutRejectedSchema,
  PayoutRequestedSchema,
  PayoutVerifiedSchema,
} from '@coinvoice/runtime/gen/coinvoice/payout/v1/events_pb';
import { serializeWebhookBody, webhookForEventMessage, type WebhookEventType } from './payloads';

/** The ping: an event type of its own, not in the catalogue. */
export const PING_TEST_EVENT_TYPE = 'webhook.test';
/** The invoice or payout every test event names: never a real one. */
export const TEST_EVENT_SUBJECT_ID = '00000000-0000-4000-8000-000000000000';
export const TEST_EVENT_ORDER_ID = 'coinvoice-test-event';
const ZERO_ETH_TX = `0x${'0'.repeat(64)}`;
const ZERO_BTC_TX = '0'.repeat(64);

interface TestEventProject {
  projectId: string;
  environment: 'live' | 'sandbox';
}

type SampleOf = (p: TestEventProject) => Message;

const invoice = (p: TestEventProject) => ({ invoiceId: TEST_EVENT_SUBJECT_ID, projectId: p.projectId, orderId: TEST_EVENT_ORDER_ID, environment: p.environment });
const payout = (p: TestEventProject) => ({ payoutId: TEST_EVENT_SUBJECT_ID, projectId: p.projectId, environment: p.environment, amount: '0.0002', currency: 'BTC', network: 'bitcoin' });

/** One sample per webhook type: the compiler refuses a catalogue type without one. */
const SAMPLES: { [T in WebhookEventType]: SampleOf } = {
  'invoice.paid': (p) => create(InvoicePaidSchema, { ...invoice(p), status: 'Paid', amount: '0.00021606', currency: 'BTC', payNetwork: 'bitcoin' }),
  'invoice.expired': (p) => create(InvoiceExpiredSchema, { ...invoice(p), status: 'Expired', currency: 'BTC', payNetwork: 'bitcoin' }),
  'invoice.confirming': (p) =>
    create(InvoiceConfirmingSchema, { ...invoice(p), status: 'Confirming', amount: '0.0065', currency: 'ETH', confirmations: 1, confirmationsRequired: 2, payNetwork: 'ethereum' }),
  'invoice.partially_paid': (p) =>
    create(InvoicePartiallyPaidSchema, { ...invoice(p), status: 'PartiallyPaid', amount: '0.004', currency: 'ETH', amountRemaining: '0.0025', payNetwork: 'ethereum' }),
  'invoice.late_payment': (p) =>
    create(InvoiceLatePaymentSchema, { ...invoice(p), status: 'Paid', amount: '0.001', currency: 'ETH', transactionHash: ZERO_ETH_TX, credited: true, payNetwork: 'ethereum', network: 'ethereum' }),
  'invoice.reopened': (p) =>
    create(InvoiceReopenedSchema, { ...invoice(p), status: 'PartiallyPaid', amount: '0.004', currency: 'ETH', previousStatus: 'Confirming', payNetwork: 'ethereum' }),
  'payout.requested': (p) => create(PayoutRequestedSchema, { ...payout(p), status: 'AwaitingVerification' }),
  'payout.verified': (p) => create(PayoutVerifiedSchema, { ...payout(p), status: 'Pending', origin: 'merchant' }),
  'payout.completed': (p) => create(PayoutCompletedSchema, { ...payout(p), status: 'Completed', transactionHash: ZERO_BTC_TX }),
  'payout.rejected': (p) => create(PayoutRejectedSchema, { ...payout(p), status: 'Rejected', adminNote: 'A test event: no payout was rejected' }),
  'payout.cancelled': (p) => create(PayoutCancelledSchema, { ...payout(p), status: 'Cancelled', reason: 'user' }),
};

export type TestEventType = WebhookEventType | typeof PING_TEST_EVENT_TYPE;

/** Every type a test event can have: the ping, then the catalogue in its order. */
export const TEST_EVENT_TYPES: readonly TestEventType[] = [PING_TEST_EVENT_TYPE, ...(Object.keys(SAMPLES) as WebhookEventType[])];

export function isTestEventType(value: string): value is TestEventType {
  return (TEST_EVENT_TYPES as readonly string[]).includes(value);
}

/** The exact body of a test event of `eventType` for the project, written at `occurredAt`. */
export function testEventBody(eventType: TestEventType, project: TestEventProject, eventId: string, occurredAt: Date): string {
  if (eventType === PING_TEST_EVENT_TYPE) {
    return serializeWebhookBody({ eventId, projectId: project.projectId, message: 'A test event from coinvoice', sentAt: occurredAt.toISOString() });
  }
  const mapping = webhookForEventMessage(eventType, SAMPLES[eventType](project), occurredAt);
  if (mapping.kind !== 'webhook') throw new Error(`${eventType} has a test sample but is not a webhook`);
  return mapping.body;
}
