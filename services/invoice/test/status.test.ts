/** The invoice status transition table (docs/architecture.md#invoices), cell by cell, and the pay rule. */
import {
  INVOICE_EVENTS,
  INVOICE_STATUSES,
  TRANSITIONS,
  nextStatus,
  payDecision,
  sourceStatuses,
  type InvoiceEvent,
  type InvoiceStatusName,
} from '../src/domain/status';

const EXPECTED: Array<[InvoiceStatusName, InvoiceEvent, InvoiceStatusName | undefined]> = [
  ['Waiting', 'pay', 'Paid'],
  ['Waiting', 'expire', 'Expired'],
  ['Confirming', 'pay', undefined],
  ['Confirming', 'expire', undefined],
  ['PartiallyPaid', 'pay', undefined],
  ['PartiallyPaid', 'expire', undefined],
  ['Paid', 'pay', undefined],
  ['Paid', 'expire', undefined],
  ['Expired', 'pay', undefined],
  ['Expired', 'expire', undefined],
];

test('the table covers every status × event pair exactly once', () => {
  expect(EXPECTED).toHaveLength(INVOICE_STATUSES.length * INVOICE_EVENTS.length);
  expect(Object.keys(TRANSITIONS).sort()).toEqual([...INVOICE_STATUSES].sort());
});

test.each(EXPECTED)('%s --%s--> %s', (from, event, to) => {
  expect(nextStatus(from, event)).toBe(to);
});

test('only Waiting is a source status of pay and of expire (the SQL guards use this)', () => {
  expect(sourceStatuses('pay')).toEqual(['Waiting']);
  expect(sourceStatuses('expire')).toEqual(['Waiting']);
});

describe('payDecision', () => {
  const now = new Date('2026-01-01T12:00:00.000Z');
  const later = new Date(now.getTime() + 60_000);
  const earlier = new Date(now.getTime() - 1);

  test('a Waiting invoice before expiredAt is payable', () => {
    expect(payDecision({ status: 'Waiting', expiredAt: later }, now)).toEqual({ ok: true, to: 'Paid' });
  });

  test.each(['Paid', 'Expired'] as const)('a %s invoice is not payable', (status) => {
    const decision = payDecision({ status, expiredAt: later }, now);
    expect(decision).toEqual({ ok: false, reason: `invoice is ${status}; only a Waiting invoice can be paid` });
  });

  test('a Waiting invoice whose expiredAt has passed (not yet swept) is not payable', () => {
    expect(payDecision({ status: 'Waiting', expiredAt: earlier }, now)).toMatchObject({ ok: false, reason: expect.stringMatching(/expired at/) });
    expect(payDecision({ status: 'Waiting', expiredAt: now }, now).ok).toBe(false);
  });
});
