/**
 * Invoice status names and the table of SIMULATED transitions (docs/architecture.md#invoices):
 *
 *   Waiting --pay-->    Paid      (sandbox pay / dashboard Simulate)
 *   Waiting --expire--> Expired   (the expiry sweeper, once expiredAt has passed)
 *
 * Live invoices move by their payments: their status is `deriveInvoiceState` (payments.ts), and
 * the sweeper expires an open invoice only when that function says Expired. The store derives its
 * SQL guards from this table (`sourceStatuses`), so the rule lives in one place.
 */

/** Public spellings, also stored as-is in the database. */
export const INVOICE_STATUSES = ['Waiting', 'Confirming', 'PartiallyPaid', 'Paid', 'Expired'] as const;
/** Statuses whose address is still watched and which the sweeper may still expire. */
export const OPEN_INVOICE_STATUSES = ['Waiting', 'Confirming', 'PartiallyPaid'] as const satisfies readonly InvoiceStatusName[];
export type InvoiceStatusName = (typeof INVOICE_STATUSES)[number];

export const INVOICE_EVENTS = ['pay', 'expire'] as const;
export type InvoiceEvent = (typeof INVOICE_EVENTS)[number];

export const TRANSITIONS: Readonly<Record<InvoiceStatusName, Readonly<Partial<Record<InvoiceEvent, InvoiceStatusName>>>>> = {
  Waiting: { pay: 'Paid', expire: 'Expired' },
  // Live-only statuses: they move by payments and the derived status, never by simulation.
  Confirming: {},
  PartiallyPaid: {},
  Paid: {},
  Expired: {},
};

export function isInvoiceStatus(value: unknown): value is InvoiceStatusName {
  return typeof value === 'string' && (INVOICE_STATUSES as readonly string[]).includes(value);
}

/** The status `event` moves an invoice in `from` to, or undefined when the table refuses it. */
export function nextStatus(from: InvoiceStatusName, event: InvoiceEvent): InvoiceStatusName | undefined {
  return TRANSITIONS[from][event];
}

/** Every status from which `event` is allowed (for SQL guards such as `status = any(…)`). */
export function sourceStatuses(event: InvoiceEvent): InvoiceStatusName[] {
  return INVOICE_STATUSES.filter((status) => nextStatus(status, event) !== undefined);
}

export type PayDecision = { ok: true; to: InvoiceStatusName } | { ok: false; reason: string };

/**
 * Whether an invoice may be paid now: the table must allow `pay` from its status AND its
 * expiredAt must not have passed — an invoice past its lifetime is not payable even while the
 * sweeper has not yet marked it Expired.
 */
export function payDecision(invoice: { status: InvoiceStatusName; expiredAt: Date }, now: Date): PayDecision {
  const to = nextStatus(invoice.status, 'pay');
  if (to === undefined) return { ok: false, reason: `invoice is ${invoice.status}; only a Waiting invoice can be paid` };
  if (invoice.expiredAt.getTime() <= now.getTime()) {
    return { ok: false, reason: `invoice expired at ${invoice.expiredAt.toISOString()}; it can no longer be paid` };
  }
  return { ok: true, to };
}

/**
 * The status a read shows now. A sandbox invoice past its expiredAt is Expired from that instant —
 * PayInvoice already refuses it (payDecision) — though the sweeper stores Expired and sends
 * invoice.expired a moment later. A live invoice shows its stored status, derived from its
 * payments: one mined before expiredAt may still be found, and the sweeper expires it only then.
 */
export function shownStatus(invoice: { environment: 'live' | 'sandbox'; status: InvoiceStatusName; expiredAt: Date }, now: Date): InvoiceStatusName {
  if (invoice.environment !== 'sandbox' || invoice.expiredAt.getTime() > now.getTime()) return invoice.status;
  return nextStatus(invoice.status, 'expire') ?? invoice.status;
}
