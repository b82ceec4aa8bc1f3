/**
 * Every read of a live invoice answers the invoice and its payments as of ONE moment
 * (services/invoice/src/store/payments.ts, readInOneSnapshot): the watcher changes a payment and
 * the invoice's amount received in one transaction (a payment orphaned by a reorg, the amount
 * with it), and a read made of two statements could land between two such transactions and show
 * the orphaned payment beside the amount that still counted it (CI once saw 0.508 for 0.008).
 * Here a transaction flips one payment between counted and orphaned, with the amount received
 * following it, as fast as it can, while GetInvoice, ListInvoices and GetCheckout read: no answer
 * may mix the two states.
 */
import { Decimal } from '@coinvoice/domain/money';
import type { Invoice } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { createRequest, liveProject, startInvoiceHarness, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startInvoiceHarness();
});

afterAll(async () => {
  await h?.dispose();
});

const PAID = '0.0001';
/** Flips and reads each side must reach for the two to have interleaved many times. */
const ENOUGH = 60;
const COUNTED = new Set(['seen', 'confirmed', 'final']);

/** The amount received an answer's payments add up to. */
function countedSum(invoice: Invoice): string {
  return invoice.payments.filter((p) => COUNTED.has(p.status)).reduce((sum, p) => sum.plus(new Decimal(p.amount)), new Decimal(0)).toFixed();
}

test('GetInvoice, ListInvoices and GetCheckout never show a payment beside an amount received from another moment', async () => {
  const project = liveProject();
  const orderId = `snapshot-${Date.now()}`;
  const { invoice } = await h.client.createInvoice(createRequest(project, { priceAmount: '100.00', priceCurrency: 'USD', payCurrency: 'BTC', orderId }));
  const id = invoice!.id;
  const expected = new Decimal(invoice!.amountExpected);
  await h.sql.begin(async (tx) => {
    await tx`insert into payments (chain, transaction_hash, output_index, invoice_id, address, asset, amount, status)
             values ('bitcoin', ${'ab'.repeat(32)}, 0, ${id}, ${invoice!.address}, 'BTC', ${PAID}, 'seen')`;
    await tx`update invoices set amount_received = ${PAID} where id = ${id}`;
  });

  let flipping = true;
  let flips = 0;
  const flipper = (async () => {
    let counted = true;
    while (flipping) {
      counted = !counted;
      await h.sql.begin(async (tx) => {
        await tx`update payments set status = ${counted ? 'seen' : 'orphaned'} where invoice_id = ${id}`;
        await tx`update invoices set amount_received = ${counted ? PAID : '0'} where id = ${id}`;
      });
      flips++;
    }
  })();

  // Counts, not a time box: on a slow, shared machine (CI once managed 27 flips in 2.5 s) the two
  // loops go on until each has done enough to interleave; Jest's timeout bounds a real hang.
  const torn: string[] = [];
  let reads = 0;
  try {
    while (flips < ENOUGH || reads < ENOUGH) {
      const [got, listed, checkout] = await Promise.all([
        h.client.getInvoice({ projectId: project.projectId, invoiceId: id }),
        h.client.listInvoices({ projectId: project.projectId, orderId }),
        h.client.getCheckout({ invoiceId: id }),
      ]);
      reads++;
      for (const [what, inv] of [['GetInvoice', got.invoice!], ['ListInvoices', listed.invoices[0]!]] as const) {
        if (new Decimal(inv.amountReceived).toFixed() !== countedSum(inv)) torn.push(`${what}: amountReceived ${inv.amountReceived}, payments counting ${countedSum(inv)}`);
      }
      const c = checkout.checkout!;
      const accounted = new Decimal(c.amountReceived).plus(new Decimal(c.amountRemaining));
      if (!accounted.eq(expected)) torn.push(`GetCheckout: amountReceived ${c.amountReceived} + amountRemaining ${c.amountRemaining} ≠ ${expected.toFixed()}`);
    }
  } finally {
    flipping = false;
    await flipper;
  }
  expect(flips).toBeGreaterThanOrEqual(ENOUGH);
  expect(reads).toBeGreaterThanOrEqual(ENOUGH);
  expect(torn.slice(0, 5)).toEqual([]);
}, 60_000);
