/**
 * The ledger's feed: `invoice.paid` events from the invoice service's stream `<NS>_INVOICE`,
 * through one durable pull consumer ("payout-ledger") shared by every replica, each credited
 * exactly once:
 *
 * - the runtime's IdempotentConsumer records the event id in processed_events in the same
 *   transaction as the credit (a redelivered message is skipped), and
 * - the credit itself is unique per invoice (a re-published event under a NEW id, e.g. a relay
 *   re-publish outside JetStream's duplicate window, credits nothing either).
 *
 * The credit goes to the balance of the event's project, environment, coin and network (its
 * `pay_network`; an event without one, written before networks, is on the coin's default network:
 * docs/accounting.md#balances-per-network): a sandbox payment lands in a sandbox balance, which a
 * live project never sees, and USDT paid on bsc in the bsc balance. NATS 2.9 allows one filter subject
 * per consumer: exactly `<ns>.invoice.paid`.
 *
 * A second durable consumer ("payout-ledger-late", `<ns>.invoice.late_payment`) credits live
 * money that invoice.paid did not include (after expiry, after Paid, a later overpayment), once
 * per payment id; a late payment of another asset or on another network (`credited: false`)
 * credits nothing.
 */
import { fromJson } from '@bufbuild/protobuf';
import { ensureServiceStream, EventNamespace, IdempotentConsumer, type ConsumedEvent, type EventTransaction, type Logger, type Sql, type EventVerifier, type StreamSettings, type Worker } from '@coinvoice/runtime';
import { DEFAULT_NETWORK, findCryptoCurrency, isPayNetwork, networksCarrying, payMethod } from '@coinvoice/chains/currencies';
import { formatPlain, parsePositiveDecimal } from '@coinvoice/domain/money';
import { InvoiceLatePaymentSchema, InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import type { NatsConnection } from 'nats';
import type { ProjectEnvironment } from '@coinvoice/domain/environment';
import { isUuid } from '@coinvoice/runtime';
import { creditInvoice, creditInvoices, creditLatePayment, type BalanceKey } from '../store/ledger';
import { sweepIfDue } from '../auto-sweep';
import type { PayoutRow } from '../store/payouts';

export const LEDGER_CONSUMER = 'payout-ledger';
export const LATE_PAYMENT_CONSUMER = 'payout-ledger-late';
export const INVOICE_PAID = 'invoice.paid';
export const INVOICE_LATE_PAYMENT = 'invoice.late_payment';

export interface LatePaymentCredit extends InvoiceCredit {
  paymentId: string;
}

/** The credit an invoice.late_payment asks for; `credit: null` when it credits nothing (another asset or network, sandbox). */
export function creditOfLatePayment(
  payload: ConsumedEvent['payload'],
): { ok: true; credit: LatePaymentCredit | null } | { ok: false; reason: string } {
  let event;
  try {
    event = fromJson(InvoiceLatePaymentSchema, payload, { ignoreUnknownFields: true });
  } catch (err) {
    return { ok: false, reason: `not an InvoiceLatePayment message: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (!event.credited || event.environment !== 'live') return { ok: true, credit: null };
  if (event.paymentId === '') return { ok: false, reason: 'paymentId is missing' };
  // Money that arrived on another network than the invoice's is never credited (docs/networks.md#wrong-network):
  // a "credited" one naming two networks contradicts itself, and crediting either balance could be wrong.
  if (event.network !== '' && event.payNetwork !== '' && event.network !== event.payNetwork) {
    return { ok: false, reason: `credited, yet paid on ${event.network} for an invoice on ${event.payNetwork}` };
  }
  // A credited payment is on the invoice's network: an event that names only where it arrived says
  // the same thing.
  return liveLatePaymentCreditOf({ ...event, payNetwork: event.payNetwork !== '' ? event.payNetwork : event.network });
}

/** A live late payment's credit: the invoice's checks, and a payment id ("network:transaction:output") on the credited network. */
function liveLatePaymentCreditOf(
  fields: { invoiceId: string; projectId: string; currency: string; amount: string; payNetwork: string; paymentId: string },
): { ok: true; credit: LatePaymentCredit } | { ok: false; reason: string } {
  const credit = invoiceCreditOf(fields, 'live');
  if (!credit.ok) return credit;
  const paidOn = fields.paymentId.split(':', 1)[0];
  if (paidOn !== credit.credit.network) {
    return { ok: false, reason: `credited on ${credit.credit.network}, yet its payment id ${JSON.stringify(fields.paymentId)} names another network` };
  }
  return { ok: true, credit: { ...credit.credit, paymentId: fields.paymentId } };
}

/**
 * A live credit the invoice service reported that the ledger lacks (CreditMissing,
 * docs/accounting.md#crediting-what-is-missing), applied as its event would have been: the same
 * checks, the same credit unique per invoice or payment (an event arriving after it credits
 * nothing, and it credits nothing after the event), the auto-sweep check after it. `eventId`
 * names the repair in the ledger entry. `credited` undefined: it was in the ledger by now.
 */
export async function creditReported(
  tx: EventTransaction,
  reported: { invoiceId: string; projectId: string; paymentId: string; currency: string; amount: string; network: string },
  eventId: string,
  options: Pick<LedgerConsumerOptions, 'onAutoSwept'>,
  log: Logger,
): Promise<{ ok: true; credited: InvoiceCredit & { paymentId?: string } | undefined } | { ok: false; reason: string }> {
  const fields = { ...reported, payNetwork: reported.network };
  if (reported.paymentId !== '') {
    const late = liveLatePaymentCreditOf(fields);
    if (!late.ok) return late;
    if (!(await creditLatePayment(tx, { ...late.credit, eventId }))) return { ok: true, credited: undefined };
    await autoSweep(tx, late.credit, options, log);
    return { ok: true, credited: late.credit };
  }
  const paid = invoiceCreditOf(fields, 'live');
  if (!paid.ok) return paid;
  if (!(await creditInvoice(tx, { ...paid.credit, eventId }))) return { ok: true, credited: undefined };
  await autoSweep(tx, paid.credit, options, log);
  return { ok: true, credited: paid.credit };
}

/**
 * The fields every credit checks, in one place: ids are UUIDs, a known coin on a network that
 * carries it, a positive amount in whole base units of that (coin, network).
 */
function invoiceCreditOf(
  event: { invoiceId: string; projectId: string; currency: string; amount: string; payNetwork: string },
  environment: ProjectEnvironment,
): { ok: true; credit: InvoiceCredit } | { ok: false; reason: string } {
  if (!isUuid(event.invoiceId)) return { ok: false, reason: 'invoiceId is not a UUID' };
  if (!isUuid(event.projectId)) return { ok: false, reason: 'projectId is not a UUID' };
  const coin = findCryptoCurrency(event.currency);
  if (!coin.ok) return { ok: false, reason: `currency: ${coin.reason}` };
  // Events from before networks carry no pay_network: their money is on the default network.
  const network = event.payNetwork === '' ? DEFAULT_NETWORK[coin.value.code] : event.payNetwork;
  const method = isPayNetwork(network) ? payMethod(coin.value.code, network) : undefined;
  if (!method) return { ok: false, reason: `payNetwork ${JSON.stringify(network)} does not carry ${coin.value.code} (networks: ${networksCarrying(coin.value.code).join(', ')})` };
  // No finer than the entry's base unit: a credit of a fraction of a satoshi could never be paid
  // out (USDT on bsc keeps its 18 decimals: docs/networks.md#amounts-and-addresses).
  const amount = parsePositiveDecimal(event.amount, method.baseUnitDecimals);
  if (!amount.ok) return { ok: false, reason: `amount ${amount.reason}` };
  return {
    ok: true,
    credit: {
      invoiceId: event.invoiceId.toLowerCase(),
      projectId: event.projectId.toLowerCase(),
      environment,
      currency: coin.value.code,
      network: method.chain,
      amount: formatPlain(amount.value),
    },
  };
}

/** Applies one invoice.late_payment inside the consumer's transaction. */
export function latePaymentHandler(options: Pick<LedgerConsumerOptions, 'logger' | 'onCredited' | 'onAutoSwept'>) {
  return async (tx: EventTransaction, event: ConsumedEvent): Promise<void> => {
    const log = options.logger.child({ eventId: event.id, eventType: event.type });
    const parsed = creditOfLatePayment(event.payload);
    if (!parsed.ok) {
      log.error({ error: parsed.reason }, 'payout ledger: malformed invoice.late_payment skipped; nothing credited');
      return;
    }
    const { credit } = parsed;
    if (!credit) return;
    if (await creditLatePayment(tx, { ...credit, eventId: event.id })) {
      log.info({ invoiceId: credit.invoiceId, paymentId: credit.paymentId, currency: credit.currency, network: credit.network, amount: credit.amount }, 'payout ledger: late payment credited');
      options.onCredited?.(credit);
      await autoSweep(tx, credit, options, log);
    } else {
      log.info({ paymentId: credit.paymentId }, 'payout ledger: late payment was already credited; duplicate ignored');
    }
  };
}

export interface InvoiceCredit extends BalanceKey {
  invoiceId: string;
  /** Canonical decimal string. */
  amount: string;
}

/** The credit an invoice.paid payload asks for, or why it cannot be applied. */
export function creditOfInvoicePaid(payload: ConsumedEvent['payload']): { ok: true; credit: InvoiceCredit } | { ok: false; reason: string } {
  let event;
  try {
    event = fromJson(InvoicePaidSchema, payload, { ignoreUnknownFields: true });
  } catch (err) {
    return { ok: false, reason: `not an InvoicePaid message: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (event.environment !== 'live' && event.environment !== 'sandbox') return { ok: false, reason: `environment ${JSON.stringify(event.environment)} is not live|sandbox` };
  return invoiceCreditOf(event, event.environment);
}

export interface LedgerConsumerOptions {
  sql: Sql;
  nats: NatsConnection;
  namespace: string;
  /** The invoice stream's configured shape, for when this consumer is first to create it. */
  stream: StreamSettings;
  /** The invoice service's public keys: only invoice.paid / invoice.late_payment it signed are credited. */
  verifier: EventVerifier;
  logger: Logger;
  /** Told after each credit's transaction ran (metrics). */
  onCredited?: (credit: InvoiceCredit) => void;
  /** Told of each auto-sweep payout a credit created (metrics). */
  onAutoSwept?: (payout: PayoutRow) => void;
}

/**
 * The auto-sweep trigger (services/payout/README.md#auto-sweep): in the credit's transaction,
 * under the balance row the credit just locked, so concurrent credits crossing the threshold
 * create one sweep payout between them.
 */
async function autoSweep(tx: EventTransaction, credit: InvoiceCredit, options: Pick<LedgerConsumerOptions, 'onAutoSwept'>, log: Logger): Promise<void> {
  const payout = await sweepIfDue(tx, credit);
  if (!payout) return;
  options.onAutoSwept?.(payout);
  log.info({ payoutId: payout.id, projectId: payout.project_id, currency: payout.currency, amount: payout.amount }, 'payout ledger: threshold reached, auto-sweep payout created');
}

/**
 * Applies a group of invoice.paid inside the consumer's transaction (the runtime's groupHandler):
 * sandbox credits in one multi-row statement (a sandbox balance never sweeps); each live credit on
 * its own, in delivery order, followed by its auto-sweep check under the balance row it just locked.
 */
export function ledgerGroupHandler(options: Pick<LedgerConsumerOptions, 'logger' | 'onCredited' | 'onAutoSwept'>) {
  return async (tx: EventTransaction, events: readonly ConsumedEvent[]): Promise<void> => {
    const credits: Array<InvoiceCredit & { eventId: string }> = [];
    for (const event of events) {
      const parsed = creditOfInvoicePaid(event.payload);
      // A producer bug: retrying cannot fix it, and it must not hold up the events behind it.
      if (!parsed.ok) options.logger.error({ eventId: event.id, eventType: event.type, error: parsed.reason }, 'payout ledger: malformed invoice.paid skipped; nothing credited');
      else credits.push({ ...parsed.credit, eventId: event.id });
    }
    const told = (credit: InvoiceCredit & { eventId: string }, credited: boolean): Logger => {
      const log = options.logger.child({ eventId: credit.eventId, eventType: INVOICE_PAID });
      if (!credited) {
        log.info({ invoiceId: credit.invoiceId }, 'payout ledger: invoice was already credited; duplicate event ignored');
        return log;
      }
      log.info({ invoiceId: credit.invoiceId, projectId: credit.projectId, environment: credit.environment, currency: credit.currency, network: credit.network, amount: credit.amount }, 'payout ledger: invoice credited');
      options.onCredited?.(credit);
      return log;
    };
    const sandbox = credits.filter((credit) => credit.environment === 'sandbox');
    const credited = await creditInvoices(tx, sandbox);
    // An invoice twice in the group went in once: the first of its events is the one credited.
    for (const credit of sandbox) told(credit, credited.delete(credit.invoiceId));
    for (const credit of credits.filter((c) => c.environment !== 'sandbox')) {
      const isNew = await creditInvoice(tx, credit);
      const log = told(credit, isNew);
      if (isNew) await autoSweep(tx, credit, options, log);
    }
  };
}

/** The consumer as a Worker: makes sure the invoice stream exists (invoice may start later), then consumes. */
export function ledgerConsumer(options: LedgerConsumerOptions): Worker {
  const namespace = EventNamespace.of(options.namespace);
  // The invoice service's stream: created if missing (it may start later, or its store was lost), never reconfigured.
  const ensureInvoiceStream = () => ensureServiceStream(options.nats, { namespace, service: 'invoice', ...options.stream, reconfigure: false });
  const consumer = new IdempotentConsumer({
    sql: options.sql,
    nats: options.nats,
    stream: namespace.streamName('invoice'),
    name: LEDGER_CONSUMER,
    filterSubjects: [namespace.subject(INVOICE_PAID)],
    verifier: options.verifier,
    logger: options.logger,
    groupHandler: ledgerGroupHandler(options),
    // Database writes only: credits that arrive together commit together (docs/performance.md#events).
    groupTransactions: true,
    restoreStream: ensureInvoiceStream,
  });
  const late = new IdempotentConsumer({
    sql: options.sql,
    nats: options.nats,
    stream: namespace.streamName('invoice'),
    name: LATE_PAYMENT_CONSUMER,
    filterSubjects: [namespace.subject(INVOICE_LATE_PAYMENT)],
    verifier: options.verifier,
    logger: options.logger,
    handler: latePaymentHandler(options),
    groupTransactions: true,
    restoreStream: ensureInvoiceStream,
  });
  return {
    async start() {
      await ensureInvoiceStream();
      await consumer.start();
      await late.start();
    },
    stop: async () => {
      await Promise.all([consumer.stop(), late.stop()]);
    },
  };
}
