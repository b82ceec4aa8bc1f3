/**
 * The event → webhook table: every published event type has a row, the documented bodies are
 * exact (keys, order, amount as a JSON number), and internal events never become webhooks.
 */
import { create, toJson, type DescMessage, type JsonValue, type MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  ApiKeyRevokedSchema,
  file_coinvoice_auth_v1_events,
  ProjectUpdatedSchema,
  SessionsRevokedSchema,
} from '@coinvoice/runtime/gen/coinvoice/auth/v1/events_pb';
import {
  file_coinvoice_invoice_v1_events,
  InvoiceConfirmingSchema,
  InvoiceExpiredSchema,
  InvoiceLatePaymentSchema,
  InvoicePartiallyPaidSchema,
  InvoiceReopenedSchema,
  InvoicePaidSchema,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import {
  file_coinvoice_notifier_v1_events,
  WebhookDeliveryFailedSchema,
} from '@coinvoice/runtime/gen/coinvoice/notifier/v1/events_pb';
import {
  file_coinvoice_payout_v1_events,
  PayoutCancelledSchema,
  PayoutCompletedSchema,
  PayoutRejectedSchema,
  PayoutRequestedSchema,
  PayoutVerificationCodeIssuedSchema,
  PayoutVerifiedSchema,
} from '@coinvoice/runtime/gen/coinvoice/payout/v1/events_pb';
import Decimal from 'decimal.js';
import fc from 'fast-check';
import {
  EVENT_WEBHOOK_TABLE,
  isWebhookEventType,
  MalformedEventError,
  webhookForEventJson,
  webhookForEventMessage,
  NETWORK_BEFORE_NETWORKS,
} from '../src/domain/payloads';
import { PAY_NETWORKS as REGISTRY_NETWORKS } from '@coinvoice/chains/coin';
import { DEFAULT_NETWORK } from '@coinvoice/chains/currencies';

const at = timestampFromDate(new Date('2026-02-03T04:05:06Z'));
/** When the producer wrote the event (the relay's event-time header). */
const occurredAt = new Date('2026-02-03T04:05:07.123Z');
const OCCURRED = ',"occurredAt":"2026-02-03T04:05:07.123Z"}';

/** The event as it travels on the bus: the producer's toJson. */
function busJson<Desc extends DescMessage>(schema: Desc, init: MessageInitShape<Desc>): JsonValue {
  return toJson(schema, create(schema, init));
}

const invoicePaid = {
  invoiceId: 'inv_01J0',
  projectId: 'prj_1',
  orderId: 'order-7',
  status: 'Paid',
  amount: '0.00000001',
  currency: 'BTC',
  environment: 'sandbox',
  transactionHash: 'ab'.repeat(32),
  paidAt: at,
  payNetwork: 'bitcoin',
};
const payout = { payoutId: 'po_1', projectId: 'prj_1', environment: 'live', amount: '123456.12345678', currency: 'USDT', network: 'tron' };

// Every event type, its payload, and the exact body it sends (null: never a webhook).
const cases: ReadonlyArray<[eventType: string, payload: JsonValue, body: string | null]> = [
  [
    'invoice.paid',
    busJson(InvoicePaidSchema, invoicePaid),
    '{"invoiceId":"inv_01J0","orderId":"order-7","status":"Paid","amount":0.00000001,"currency":"BTC","environment":"sandbox","amountDecimal":"0.00000001","payNetwork":"bitcoin"' + OCCURRED,
  ],
  [
    'invoice.expired',
    busJson(InvoiceExpiredSchema, { invoiceId: 'inv_2', projectId: 'prj_1', status: 'Expired', currency: 'ETH', environment: 'live', expiredAt: at, payNetwork: 'optimism' }),
    '{"invoiceId":"inv_2","orderId":"","status":"Expired","currency":"ETH","environment":"live","payNetwork":"optimism"' + OCCURRED,
  ],
  [
    'invoice.confirming',
    busJson(InvoiceConfirmingSchema, { invoiceId: 'inv_3', projectId: 'prj_1', orderId: 'o-3', status: 'Confirming', amount: '0.5', currency: 'ETH', environment: 'live', confirmations: 1, confirmationsRequired: 12, payNetwork: 'base' }),
    '{"invoiceId":"inv_3","orderId":"o-3","status":"Confirming","amount":0.5,"currency":"ETH","environment":"live","amountDecimal":"0.5","confirmations":1,"confirmationsRequired":12,"payNetwork":"base"' + OCCURRED,
  ],
  [
    'invoice.partially_paid',
    busJson(InvoicePartiallyPaidSchema, { invoiceId: 'inv_4', projectId: 'prj_1', status: 'PartiallyPaid', amount: '10', currency: 'USDT', environment: 'live', amountRemaining: '9.5', payNetwork: 'tron' }),
    '{"invoiceId":"inv_4","orderId":"","status":"PartiallyPaid","amount":10,"currency":"USDT","environment":"live","amountDecimal":"10","amountRemaining":9.5,"amountRemainingDecimal":"9.5","payNetwork":"tron"' + OCCURRED,
  ],
  [
    'invoice.late_payment',
    busJson(InvoiceLatePaymentSchema, { invoiceId: 'inv_5', projectId: 'prj_1', status: 'Expired', amount: '3', currency: 'USDC', environment: 'live', transactionHash: '0xabc', credited: false, paymentId: 'ethereum:0xabc:4', payNetwork: 'base', network: 'ethereum' }),
    '{"invoiceId":"inv_5","orderId":"","status":"Expired","amount":3,"currency":"USDC","environment":"live","amountDecimal":"3","transactionHash":"0xabc","credited":false,"payNetwork":"base","network":"ethereum"' + OCCURRED,
  ],
  [
    'invoice.reopened',
    busJson(InvoiceReopenedSchema, { invoiceId: 'inv_6', projectId: 'prj_1', status: 'Waiting', amount: '0', currency: 'ETH', environment: 'live', previousStatus: 'Confirming', payNetwork: 'arbitrum' }),
    '{"invoiceId":"inv_6","orderId":"","status":"Waiting","amount":0,"currency":"ETH","environment":"live","amountDecimal":"0","previousStatus":"Confirming","payNetwork":"arbitrum"' + OCCURRED,
  ],
  [
    'payout.requested',
    busJson(PayoutRequestedSchema, { ...payout, status: 'AwaitingVerification', address: 'T…', note: 'rent', createdAt: at }),
    '{"payoutId":"po_1","status":"AwaitingVerification","amount":123456.12345678,"currency":"USDT","environment":"live","network":"tron"' + OCCURRED,
  ],
  [
    'payout.verification_code_issued',
    busJson(PayoutVerificationCodeIssuedSchema, { ...payout, status: 'AwaitingVerification', email: 'm@example.com', code: '123456', expiresAt: at }),
    null,
  ],
  [
    'payout.verified',
    busJson(PayoutVerifiedSchema, { ...payout, status: 'Pending', verifiedAt: at, origin: 'auto_sweep' }),
    '{"payoutId":"po_1","status":"Pending","amount":123456.12345678,"currency":"USDT","environment":"live","origin":"auto_sweep","network":"tron"' + OCCURRED,
  ],
  [
    'payout.completed',
    busJson(PayoutCompletedSchema, { ...payout, status: 'Completed', transactionHash: '0xfeed', completedAt: at }),
    '{"payoutId":"po_1","status":"Completed","amount":123456.12345678,"currency":"USDT","environment":"live","transactionHash":"0xfeed","network":"tron"' + OCCURRED,
  ],
  [
    'payout.rejected',
    busJson(PayoutRejectedSchema, { ...payout, status: 'Rejected', adminNote: 'address is "sanctioned"', rejectedAt: at }),
    '{"payoutId":"po_1","status":"Rejected","amount":123456.12345678,"currency":"USDT","environment":"live","adminNote":"address is \\"sanctioned\\"","network":"tron"' + OCCURRED,
  ],
  [
    'payout.cancelled',
    busJson(PayoutCancelledSchema, { ...payout, status: 'Cancelled', reason: 'attempts_exhausted', cancelledAt: at }),
    '{"payoutId":"po_1","status":"Cancelled","amount":123456.12345678,"currency":"USDT","environment":"live","reason":"attempts_exhausted","network":"tron"' + OCCURRED,
  ],
  [
    'notifier.webhook_delivery_failed',
    busJson(WebhookDeliveryFailedSchema, {
      deliveryId: 'd1', projectId: 'prj_1', eventId: 'e1', eventType: 'invoice.paid', url: 'https://x.example/h', attemptCount: 8, failedAt: at,
    }),
    null,
  ],
  ['auth.api_key_revoked', busJson(ApiKeyRevokedSchema, { keyId: 'k1', projectId: 'prj_1', keyHash: 'ff'.repeat(32), revokedAt: at }), null],
  ['auth.sessions_revoked', busJson(SessionsRevokedSchema, { merchantId: 'm1', minSessionEpoch: 2, revokedAt: at }), null],
  [
    'auth.project_updated',
    busJson(ProjectUpdatedSchema, { projectId: 'prj_1', merchantId: 'm1', name: 'Shop', webhookUrl: 'https://x.example/h', invoiceLifetimeMinutes: 30, updatedAt: at }),
    null,
  ],
];

describe('the event table', () => {
  test('has exactly one row per event message in the protos', () => {
    const published = [
      file_coinvoice_auth_v1_events,
      file_coinvoice_invoice_v1_events,
      file_coinvoice_notifier_v1_events,
      file_coinvoice_payout_v1_events,
    ].flatMap((file) => file.messages.map((m) => m.typeName));
    const inTable = Object.values(EVENT_WEBHOOK_TABLE).map((rule) => rule.schema.typeName);
    expect([...inTable].sort()).toEqual([...published].sort());
    expect(Object.keys(EVENT_WEBHOOK_TABLE).sort()).toEqual(cases.map(([type]) => type).sort());
  });

  test.each(cases)('%s', (eventType, payload, body) => {
    const mapped = webhookForEventJson(eventType, payload, occurredAt);
    if (body === null) {
      expect(mapped).toEqual({ kind: 'not_a_webhook', reason: expect.any(String) });
      expect(isWebhookEventType(eventType)).toBe(false);
    } else {
      expect(mapped).toEqual({ kind: 'webhook', projectId: 'prj_1', body });
      expect(isWebhookEventType(eventType)).toBe(true);
    }
  });

  test('the verification code never reaches a webhook body', () => {
    const [, payload] = cases.find(([type]) => type === 'payout.verification_code_issued') ?? [];
    const mapped = webhookForEventJson('payout.verification_code_issued', payload ?? null, occurredAt);
    expect(mapped.kind).toBe('not_a_webhook');
    expect(JSON.stringify(mapped)).not.toContain('123456');
  });

  test.each(['invoice.refunded', 'payout.anything', '__proto__', 'constructor', ''])('unknown type %j is not a webhook', (eventType) => {
    expect(webhookForEventJson(eventType, busJson(InvoicePaidSchema, invoicePaid), occurredAt)).toEqual({
      kind: 'not_a_webhook',
      reason: expect.stringContaining('unknown event type'),
    });
  });
});

describe('invoice.paid', () => {
  test('has exactly the documented keys, in the documented order', () => {
    const mapped = webhookForEventJson('invoice.paid', busJson(InvoicePaidSchema, invoicePaid), occurredAt);
    if (mapped.kind !== 'webhook') throw new Error('expected a webhook');
    // The seed's six, exactly as documented, then the additions: amountDecimal (the amount's exact
    // digits: a live ETH amount has 18 decimals, more than a double keeps), payNetwork (issue 24)
    // and occurredAt, which every body ends with.
    expect(Object.keys(JSON.parse(mapped.body) as object)).toEqual(['invoiceId', 'orderId', 'status', 'amount', 'currency', 'environment', 'amountDecimal', 'payNetwork', 'occurredAt']);
  });

  test('orderId is "" when absent (as the public Invoice has it), amount a JSON number', () => {
    const { orderId: _omitted, ...withoutOrder } = invoicePaid;
    const mapped = webhookForEventJson('invoice.paid', busJson(InvoicePaidSchema, { ...withoutOrder, amount: '1.50000000' }), occurredAt);
    if (mapped.kind !== 'webhook') throw new Error('expected a webhook');
    const parsed = JSON.parse(mapped.body) as Record<string, unknown>;
    expect(parsed.orderId).toBe('');
    expect(parsed.amount).toBe(1.5);
    expect(mapped.body).toContain('"amount":1.5,');
  });

  test('ignores fields producers may add later', () => {
    const payload = { ...(busJson(InvoicePaidSchema, invoicePaid) as Record<string, JsonValue>), newField: 'x' };
    expect(webhookForEventJson('invoice.paid', payload, occurredAt).kind).toBe('webhook');
  });

  test('the same event gives the same bytes, from JSON or from a decoded message', () => {
    const fromJson = webhookForEventJson('invoice.paid', busJson(InvoicePaidSchema, invoicePaid), occurredAt);
    expect(webhookForEventJson('invoice.paid', busJson(InvoicePaidSchema, invoicePaid), occurredAt)).toEqual(fromJson);
    expect(webhookForEventMessage('invoice.paid', create(InvoicePaidSchema, invoicePaid), occurredAt)).toEqual(fromJson);
  });

  test('a message of another type is refused', () => {
    expect(() => webhookForEventMessage('invoice.paid', create(InvoiceExpiredSchema, { invoiceId: 'i', projectId: 'p' }), occurredAt)).toThrow(
      MalformedEventError,
    );
  });

  test.each([
    ['environment "prod"', { environment: 'prod' }, /environment "prod" is not live\|sandbox/],
    ['amount "abc"', { amount: 'abc' }, /amount "abc" is not a decimal/],
    ['amount "1,5"', { amount: '1,5' }, /not a decimal/],
    ['amount with JSON injection', { amount: '1,"status":"Paid"' }, /not a decimal/],
    ['empty invoiceId', { invoiceId: '' }, /invoiceId is missing/],
    ['empty projectId', { projectId: '' }, /projectId is missing/],
    ['empty currency', { currency: '' }, /currency is missing/],
  ])('a payload with %s is malformed', (_name, change, message) => {
    expect(() => webhookForEventJson('invoice.paid', busJson(InvoicePaidSchema, { ...invoicePaid, ...change }), occurredAt)).toThrow(message);
  });

  test('payout.verified: an event from before issue 23 (no origin) was the merchant’s; an unknown origin is malformed', () => {
    const verified = { payoutId: 'po_1', projectId: 'prj_1', amount: '1', currency: 'BTC', environment: 'live', status: 'Pending' };
    const mapped = webhookForEventJson('payout.verified', busJson(PayoutVerifiedSchema, verified), occurredAt);
    expect(mapped.kind === 'webhook' && JSON.parse(mapped.body)).toMatchObject({ origin: 'merchant' });
    expect(() => webhookForEventJson('payout.verified', busJson(PayoutVerifiedSchema, { ...verified, origin: 'robot' }), occurredAt)).toThrow(/origin "robot" is not merchant\|auto_sweep/);
  });

  test('a payload that is not the event message is malformed', () => {
    expect(() => webhookForEventJson('invoice.paid', { invoiceId: 42 }, occurredAt)).toThrow(MalformedEventError);
    expect(() => webhookForEventJson('invoice.paid', 'paid', occurredAt)).toThrow(MalformedEventError);
  });
});

describe('payout bodies', () => {
  test('adminNote is null when the operator left it empty', () => {
    const mapped = webhookForEventJson('payout.rejected', busJson(PayoutRejectedSchema, { ...payout, status: 'Rejected', rejectedAt: at }), occurredAt);
    if (mapped.kind !== 'webhook') throw new Error('expected a webhook');
    expect(JSON.parse(mapped.body)).toEqual({
      payoutId: 'po_1', status: 'Rejected', amount: 123456.12345678, currency: 'USDT', environment: 'live', adminNote: null, network: 'tron', occurredAt: occurredAt.toISOString(),
    });
  });

  test('a completed payout without a transaction hash is malformed', () => {
    expect(() =>
      webhookForEventJson('payout.completed', busJson(PayoutCompletedSchema, { ...payout, status: 'Completed', completedAt: at }), occurredAt),
    ).toThrow(/transactionHash is missing/);
  });
});

test('a live amount with all of ETH’s 18 decimals: the number token digit for digit, and the exact decimal string beside it', () => {
  const payload = busJson(InvoiceLatePaymentSchema, {
    invoiceId: 'inv_7', projectId: 'prj_1', status: 'Paid', amount: '0.500000000000000001', currency: 'ETH', environment: 'live',
    transactionHash: '0xdef', credited: true, paymentId: 'ethereum:0xdef:-1',
  });
  const mapped = webhookForEventJson('invoice.late_payment', payload, occurredAt);
  if (mapped.kind !== 'webhook') throw new Error('not a webhook');
  expect(mapped.body).toContain('"amount":0.500000000000000001,');
  expect(JSON.parse(mapped.body)).toMatchObject({ amountDecimal: '0.500000000000000001', credited: true });
});

describe('payNetwork (issue 24, docs/networks.md)', () => {
  test('an event written before networks gets its currency\'s only network of that time', () => {
    const { payNetwork: _none, ...before } = invoicePaid;
    const paid = webhookForEventJson('invoice.paid', busJson(InvoicePaidSchema, { ...before, currency: 'USDT' }), occurredAt);
    expect(paid.kind === 'webhook' && (JSON.parse(paid.body) as { payNetwork: string }).payNetwork).toBe('ethereum');
    const late = webhookForEventJson(
      'invoice.late_payment',
      busJson(InvoiceLatePaymentSchema, { invoiceId: 'i', projectId: 'prj_1', status: 'Paid', amount: '1', currency: 'TRX', environment: 'live', transactionHash: 't', credited: true }),
      occurredAt,
    );
    expect(late.kind === 'webhook' && JSON.parse(late.body)).toMatchObject({ payNetwork: 'tron', network: 'tron' });
  });

  test('a network name not of the producers\' form is a malformed event, never sent', () => {
    expect(() => webhookForEventJson('invoice.paid', busJson(InvoicePaidSchema, { ...invoicePaid, payNetwork: 'Base Mainnet' }), occurredAt)).toThrow(MalformedEventError);
    expect(() =>
      webhookForEventJson('invoice.late_payment', busJson(InvoiceLatePaymentSchema, { invoiceId: 'i', projectId: 'prj_1', status: 'Paid', amount: '1', currency: 'ETH', environment: 'live', transactionHash: 't', payNetwork: 'base', network: '<script>' }), occurredAt),
    ).toThrow(MalformedEventError);
  });

  test('a payout event written before networks is sent with its currency\'s only network of that time; an unknown network is malformed', () => {
    const { network: _none, ...before } = payout;
    const completed = webhookForEventJson('payout.completed', busJson(PayoutCompletedSchema, { ...before, status: 'Completed', transactionHash: '0xfeed', completedAt: at }), occurredAt);
    expect(completed.kind === 'webhook' && JSON.parse(completed.body)).toMatchObject({ currency: 'USDT', network: 'ethereum' });
    const onBsc = webhookForEventJson('payout.requested', busJson(PayoutRequestedSchema, { ...payout, network: 'bsc', status: 'AwaitingVerification', address: '0x', createdAt: at }), occurredAt);
    expect(onBsc.kind === 'webhook' && JSON.parse(onBsc.body)).toMatchObject({ network: 'bsc' });
    expect(() =>
      webhookForEventJson('payout.cancelled', busJson(PayoutCancelledSchema, { ...payout, network: 'bsc"', status: 'Cancelled', reason: 'user', cancelledAt: at }), occurredAt),
    ).toThrow(MalformedEventError);
  });

  test('every registry network is a network name the notifier sends, and its pre-network defaults agree with the registry', () => {
    for (const network of REGISTRY_NETWORKS) {
      const paid = webhookForEventJson('invoice.paid', busJson(InvoicePaidSchema, { ...invoicePaid, payNetwork: network }), occurredAt);
      expect(paid.kind === 'webhook' && (JSON.parse(paid.body) as { payNetwork: string }).payNetwork).toBe(network);
    }
    for (const [code, network] of Object.entries(NETWORK_BEFORE_NETWORKS)) expect(DEFAULT_NETWORK[code as keyof typeof DEFAULT_NETWORK]).toBe(network);
  });
});

test('invoice.paid of a live ETH payment with 18 decimals names its exact digits in amountDecimal (the JSON number alone reads as the nearest double)', () => {
  const mapped = webhookForEventMessage(
    'invoice.paid',
    create(InvoicePaidSchema, { invoiceId: 'inv_eth', projectId: 'prj_1', orderId: '', status: 'Paid', amount: '0.008000000000000001', currency: 'ETH', environment: 'live', payNetwork: 'ethereum' }),
    new Date('2026-02-03T04:05:07.123Z'),
  );
  if (mapped.kind !== 'webhook') throw new Error('expected a webhook');
  expect(mapped.body).toContain('"amount":0.008000000000000001,');
  expect((JSON.parse(mapped.body) as { amount: number; amountDecimal: string })).toMatchObject({ amount: 0.008, amountDecimal: '0.008000000000000001' });
});
