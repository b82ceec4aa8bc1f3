/** The one invoice-status rule (docs/architecture.md#derived-status), table-tested over the combinations that matter. */
import { deriveInvoiceState, isAccounted, PAYMENT_STATUSES, type InvoiceFacts, type PaymentFacts, type PaymentStatus } from '../src/domain/payments';
import type { InvoiceStatusName } from '../src/domain/status';
import { Decimal } from '@coinvoice/domain/money';

const expiredAt = new Date('2026-01-01T13:00:00.000Z');
const before = new Date('2026-01-01T12:30:00.000Z'); // a block time before expiry
const after = new Date('2026-01-01T13:30:00.000Z'); // a block time after expiry
const nowOpen = new Date('2026-01-01T12:45:00.000Z');
const nowExpired = new Date('2026-01-01T14:00:00.000Z');

const invoice = (overrides: Partial<InvoiceFacts> = {}): InvoiceFacts => ({
  environment: 'live',
  payCurrency: 'USDT',
  payNetwork: 'ethereum',
  amountExpected: new Decimal('100'),
  expiredAt,
  tolerancePercent: new Decimal(0),
  paidAt: null,
  ...overrides,
});
const pay = (
  amount: string,
  status: PaymentStatus,
  blockTime: Date | null = before,
  asset: PaymentFacts['asset'] = 'USDT',
  credited = false,
  network: PaymentFacts['network'] = 'ethereum',
): PaymentFacts => ({
  asset,
  network,
  amount: new Decimal(amount),
  status,
  blockTime,
  credited,
});

type Row = [string, InvoiceFacts, PaymentFacts[], Date, InvoiceStatusName, string];
const TABLE: Row[] = [
  ['nothing seen', invoice(), [], nowOpen, 'Waiting', '0'],
  ['nothing seen, expired', invoice(), [], nowExpired, 'Expired', '0'],
  ['under, unconfirmed', invoice(), [pay('50', 'seen')], nowOpen, 'PartiallyPaid', '50'],
  ['under, confirmed', invoice(), [pay('50', 'confirmed')], nowOpen, 'PartiallyPaid', '50'],
  ['under, expired', invoice(), [pay('50', 'confirmed')], nowExpired, 'Expired', '50'],
  ['exact, unconfirmed', invoice(), [pay('100', 'seen')], nowOpen, 'Confirming', '100'],
  ['exact, confirmed', invoice(), [pay('100', 'confirmed')], nowOpen, 'Paid', '100'],
  ['exact, final', invoice(), [pay('100', 'final')], nowOpen, 'Paid', '100'],
  ['two halves, one confirmed', invoice(), [pay('50', 'confirmed'), pay('50', 'seen')], nowOpen, 'Confirming', '100'],
  ['two halves, both confirmed', invoice(), [pay('50', 'confirmed'), pay('50', 'final')], nowOpen, 'Paid', '100'],
  ['over, confirmed', invoice(), [pay('150', 'confirmed')], nowOpen, 'Paid', '150'],
  ['within tolerance, confirmed', invoice({ tolerancePercent: new Decimal('1') }), [pay('99', 'confirmed')], nowOpen, 'Paid', '99'],
  ['within tolerance, unconfirmed', invoice({ tolerancePercent: new Decimal('1') }), [pay('99', 'seen')], nowOpen, 'Confirming', '99'],
  ['just beyond tolerance', invoice({ tolerancePercent: new Decimal('1') }), [pay('98.99', 'confirmed')], nowOpen, 'PartiallyPaid', '98.99'],
  ['mined on time, confirmed after expiry', invoice(), [pay('100', 'confirmed', before)], nowExpired, 'Paid', '100'],
  ['mined on time, still confirming after expiry', invoice(), [pay('100', 'seen', before)], nowExpired, 'Confirming', '100'],
  ['late: mined after expiry', invoice(), [pay('100', 'confirmed', after)], nowExpired, 'Expired', '100'],
  ['late part completes nothing', invoice(), [pay('50', 'confirmed', before), pay('50', 'confirmed', after)], nowExpired, 'Expired', '100'],
  ['unmined after expiry', invoice(), [pay('100', 'seen', null)], nowExpired, 'Expired', '100'],
  ['orphaned', invoice(), [pay('100', 'orphaned')], nowOpen, 'Waiting', '0'],
  ['orphaned half of two', invoice(), [pay('50', 'orphaned'), pay('50', 'seen')], nowOpen, 'PartiallyPaid', '50'],
  ['replaced', invoice(), [pay('100', 'replaced', null)], nowOpen, 'Waiting', '0'],
  ['wrong asset', invoice(), [pay('100', 'confirmed', before, 'USDC')], nowOpen, 'Waiting', '0'],
  ['wrong asset next to a right one', invoice(), [pay('100', 'confirmed', before, 'USDC'), pay('40', 'seen')], nowOpen, 'PartiallyPaid', '40'],
  // docs/networks.md#wrong-network: the right asset on another network counts for nothing.
  ['wrong network', invoice(), [pay('100', 'confirmed', before, 'USDT', false, 'bsc')], nowOpen, 'Waiting', '0'],
  ['wrong network, expired', invoice(), [pay('100', 'confirmed', before, 'USDT', false, 'bsc')], nowExpired, 'Expired', '0'],
  ['wrong network next to a right one', invoice(), [pay('100', 'confirmed', before, 'USDT', false, 'bsc'), pay('40', 'confirmed')], nowOpen, 'PartiallyPaid', '40'],
  ['wrong network completes nothing', invoice({ payNetwork: 'base', payCurrency: 'USDC' }), [pay('60', 'confirmed', before, 'USDC', false, 'base'), pay('40', 'confirmed', before, 'USDC', false, 'ethereum')], nowOpen, 'PartiallyPaid', '60'],
  ['already paid, a wrong-network payment is not received', invoice({ paidAt: before }), [pay('100', 'confirmed', before, 'USDT', true), pay('5', 'confirmed', before, 'USDT', false, 'polygon')], nowOpen, 'Paid', '100'],
  ['already paid, payment never credited orphaned afterwards', invoice({ paidAt: before }), [pay('100', 'orphaned')], nowOpen, 'Paid', '0'],
  ['already paid, credited payment orphaned afterwards (an incident: still counted)', invoice({ paidAt: before }), [pay('100', 'orphaned', before, 'USDT', true)], nowOpen, 'Paid', '100'],
  ['already paid, a later unconfirmed payment orphaned: only the credited money counts', invoice({ paidAt: before }), [pay('100', 'confirmed', before, 'USDT', true), pay('0.5', 'orphaned')], nowOpen, 'Paid', '100'],
  ['already paid, a later payment still unconfirmed', invoice({ paidAt: before }), [pay('100', 'confirmed', before, 'USDT', true), pay('0.5', 'seen')], nowOpen, 'Paid', '100.5'],
  ['sandbox, simulated pay', invoice({ environment: 'sandbox', paidAt: before, simulatedAmount: new Decimal('100') }), [], nowOpen, 'Paid', '100'],
  ['sandbox, waiting', invoice({ environment: 'sandbox', simulatedAmount: new Decimal(0) }), [], nowOpen, 'Waiting', '0'],
  ['sandbox, expired', invoice({ environment: 'sandbox', simulatedAmount: new Decimal(0) }), [], nowExpired, 'Expired', '0'],
];

test.each(TABLE)('%s', (_name, facts, payments, now, status, received) => {
  const state = deriveInvoiceState(facts, payments, now);
  expect(state.status).toBe(status);
  expect(state.amountReceived.toFixed()).toBe(received);
});

test('remaining amount: what is missing, zero once covered or paid', () => {
  expect(deriveInvoiceState(invoice(), [pay('30', 'seen')], nowOpen).amountRemaining.toFixed()).toBe('70');
  expect(deriveInvoiceState(invoice(), [pay('150', 'seen')], nowOpen).amountRemaining.toFixed()).toBe('0');
  expect(deriveInvoiceState(invoice(), [pay('100', 'confirmed')], nowOpen).amountRemaining.toFixed()).toBe('0');
});

test('a block timestamp exactly at expiredAt is on time', () => {
  expect(deriveInvoiceState(invoice(), [pay('100', 'confirmed', expiredAt)], nowExpired).status).toBe('Paid');
});

test('accounted: confirmed or final only; seen, orphaned and replaced money never counts', () => {
  expect(PAYMENT_STATUSES.filter((status) => isAccounted(status))).toEqual(['confirmed', 'final']);
});

test('Paid needs accounted money: a payment with too few confirmations never pays, however large', () => {
  expect(deriveInvoiceState(invoice(), [pay('99', 'confirmed'), pay('500', 'seen')], nowOpen).status).toBe('Confirming');
  expect(deriveInvoiceState(invoice(), [pay('100', 'confirmed'), pay('500', 'seen')], nowOpen).status).toBe('Paid');
});
