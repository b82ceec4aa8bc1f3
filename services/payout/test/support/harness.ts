/**
 * What the payout service tests share: the service started in-process (fresh database, event
 * namespace of its own, real Postgres and NATS), a stand-in for the auth service's
 * GetProjectContext (a real gRPC server whose projects the test sets), a publisher that puts
 * invoice.paid on the invoice stream as the invoice service's relay does, direct SQL for checks,
 * and valid and broken addresses per coin and network.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import { createRpcClient } from '@coinvoice/runtime';
import { createAddressDeriver, generateDevelopmentKeyPair } from '@coinvoice/chains/addresses';
import type { CryptoCode } from '@coinvoice/chains/coin';
import { DEFAULT_NETWORK, isCryptoCode } from '@coinvoice/chains/currencies';
import { Decimal, formatPlain } from '@coinvoice/domain/money';
import type { Network } from '@coinvoice/domain/project-network';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { PayoutService, type Payout } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { waitFor } from '../../../../test/support/async';
import { AuthStandIn } from '../../../../test/support/auth-stand-in';
import { NotifierStandIn } from '../../../../test/support/notifier-stand-in';
import { InvoiceHouseStandIn } from '../../../../test/support/invoice-house-stand-in';
import { startTestService } from '../../../../test/support/service';
import { openServiceHarness, type ServiceHarnessBase } from '../../../../test/support/service-harness';
import { payoutService } from '../../src/server';

export type PayoutClient = Client<typeof PayoutService>;

export interface FakeProject {
  id: string;
  environment: 'live' | 'sandbox';
  email: string;
  /** The merchant proved the address (live payouts need it). Default true. */
  emailVerified: boolean;
}

/** The session token the auth stand-in accepts as an operator's (CompletePayout, RejectPayout). */
export const OPERATOR_TOKEN = 'operator-session-token';

/** The auth stand-in, answering with each project's environment and merchant email. */
export class FakeAuth extends AuthStandIn<FakeProject> {
  constructor() {
    super((_projectId, project) => ({
      projectId: project.id,
      projectName: 'Test shop',
      environment: project.environment === 'live' ? Environment.LIVE : Environment.SANDBOX,
      merchantId: randomUUID(),
      merchantEmail: project.email,
      webhookSecret: 'whsec_dGVzdA==',
      invoiceLifetimeMinutes: 60,
      merchantEmailVerified: project.emailVerified,
    }));
    this.operatorTokens.set(OPERATOR_TOKEN, randomUUID());
  }

  addProject(environment: 'live' | 'sandbox' = 'sandbox'): FakeProject {
    const id = randomUUID();
    const project = { id, environment, email: `m-${id.slice(0, 8)}@example.com`, emailVerified: true };
    this.projects.set(id, project);
    return project;
  }
}

/** The payout service's harness; `sql` is a pool on the payout schema. */
export interface Harness extends ServiceHarnessBase {
  auth: FakeAuth;
  /** Receives the verification emails (the codes). */
  notifier: NotifierStandIn;
  /** Answers FindHouseAddress: the addresses a test makes coinvoice's own. */
  invoice: InvoiceHouseStandIn;
  client: PayoutClient;
  /** Publishes an invoice.paid as the invoice service's relay would; returns the event id. */
  publishInvoicePaid(paid: InvoicePaidInput, options?: { eventId?: string }): Promise<string>;
  /**
   * Publishes an invoice.paid and waits until the ledger consumer has handled it. `payNetwork`
   * absent: the event carries none (as events from before networks).
   */
  credit(project: FakeProject, currency: string, amount: string, invoiceId?: string, payNetwork?: string): Promise<string>;
  /** Waits until the ledger consumer has recorded `eventId` as processed. */
  processed(eventId: string): Promise<void>;
}

export interface InvoicePaidInput {
  invoiceId?: string;
  projectId: string;
  environment: string;
  currency: string;
  amount: string;
  /** The invoice's pay_network; absent: none in the event (an event from before networks). */
  payNetwork?: string;
}

/**
 * Settings every test service gets unless overridden: a fast sweeper, and limits out of the way
 * (tests of the limits set their own).
 */
export const FAST_SWEEP = {
  PAYOUT_SWEEP_INTERVAL_MS: '100',
  PAYOUT_MAX_OPEN_UNVERIFIED: '1000',
  RATE_LIMIT_PAYOUT_VERIFY_PER_PROJECT: '100000/1m',
  RATE_LIMIT_PAYOUT_REQUEST_PER_PROJECT: '100000/1m',
};

export async function startPayoutHarness(env: NodeJS.ProcessEnv = {}): Promise<Harness> {
  const auth = await new FakeAuth().start();
  const notifier = await new NotifierStandIn().start();
  const invoice = await new InvoiceHouseStandIn().start();
  const svc = await startTestService(payoutService, { env: { AUTH_URL: auth.url, NOTIFIER_URL: notifier.url, INVOICE_URL: invoice.url, ...FAST_SWEEP, ...env } });
  const client = createRpcClient(PayoutService, svc.url, { timeoutMs: 30_000 });
  const base = await openServiceHarness(svc, { schema: 'payout', poolSize: 4, natsName: 'payout-test', streams: ['invoice', 'payout'] });
  const harness: Harness = {
    ...base,
    auth,
    notifier,
    invoice,
    client,
    async publishInvoicePaid(paid, options = {}) {
      const id = options.eventId ?? randomUUID();
      const invoiceId = paid.invoiceId ?? randomUUID();
      const message = create(InvoicePaidSchema, {
        invoiceId,
        projectId: paid.projectId,
        orderId: `order-${invoiceId.slice(0, 8)}`,
        status: 'Paid',
        amount: paid.amount,
        currency: paid.currency,
        environment: paid.environment,
        transactionHash: 'ab'.repeat(32),
        paidAt: timestampFromDate(new Date()),
        ...(paid.payNetwork === undefined ? {} : { payNetwork: paid.payNetwork }),
      });
      await base.publishEvent({ id, type: 'invoice.paid', payload: toJson(InvoicePaidSchema, message), key: invoiceId });
      return id;
    },
    async processed(eventId) {
      await waitFor(`event ${eventId} processed by the ledger`, async () => {
        const rows = await base.sql`select 1 from processed_events where consumer_name = 'payout-ledger' and event_id = ${eventId}`;
        return rows.length === 1 || undefined;
      });
    },
    async credit(project, currency, amount, invoiceId = randomUUID(), payNetwork) {
      const eventId = await harness.publishInvoicePaid({ invoiceId, projectId: project.id, environment: project.environment, currency, amount, ...(payNetwork === undefined ? {} : { payNetwork }) });
      await harness.processed(eventId);
      return invoiceId;
    },
    async dispose() {
      await base.dispose();
      await auth.stop();
      await notifier.stop();
      await invoice.stop();
    },
  };
  return harness;
}

export function environmentOf(project: FakeProject): Environment {
  return project.environment === 'live' ? Environment.LIVE : Environment.SANDBOX;
}

const derivers = new Map<string, ReturnType<typeof createAddressDeriver>>();
let addressIndex = 0;

/** A fresh valid address of `currency` on the network of `environment` (sandbox: testnet). */
export function addressFor(currency: CryptoCode, environment: 'live' | 'sandbox' = 'sandbox'): string {
  const network: Network = environment === 'sandbox' ? 'testnet' : 'mainnet';
  const cacheKey = `${currency}/${network}`;
  let deriver = derivers.get(cacheKey);
  if (!deriver) {
    deriver = createAddressDeriver(generateDevelopmentKeyPair(currency, network).xpub, currency, network);
    derivers.set(cacheKey, deriver);
  }
  if (!deriver.ok) throw new Error(deriver.reason);
  return deriver.value.addressAt(addressIndex++);
}

/**
 * The same address with one character changed so that only its checksum is wrong: for EIP-55 the
 * case of one hex letter flipped; for bech32 and base58check the last character replaced.
 */
export function breakChecksum(address: string): string {
  if (address.startsWith('0x')) {
    // One letter's case flipped, chosen so that the result still mixes cases: an all-lower or
    // all-upper address is not a checksum error but an address without one (another refusal).
    const flipAt = (i: number) => {
      const c = address.charAt(i);
      return address.slice(0, i) + (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) + address.slice(i + 1);
    };
    const mixed = (a: string) => /[a-f]/.test(a.slice(2)) && /[A-F]/.test(a.slice(2));
    const letters = [...address].flatMap((c, index) => (index > 1 && /[a-fA-F]/.test(c) ? [index] : []));
    const broken = letters.map(flipAt).find(mixed);
    if (!broken) throw new Error(`breakChecksum: ${address} has too few letters to break its checksum and keep mixed case`);
    return broken;
  }
  const alphabet = address.startsWith('T') ? '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz' : 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
  const last = address.slice(-1);
  const replacement = [...alphabet].find((c) => c !== last) ?? 'q';
  return address.slice(0, -1) + replacement;
}

/** A RequestPayout for `project` with sensible defaults. */
export function payoutRequest(project: FakeProject, overrides: Partial<{ amount: string; currency: CryptoCode; address: string; note: string; idempotencyKey: string; network: string }> = {}) {
  const currency = overrides.currency ?? 'BTC';
  return {
    projectId: project.id,
    environment: environmentOf(project),
    amount: overrides.amount ?? '0.01',
    currency,
    address: overrides.address ?? addressFor(currency, project.environment),
    ...(overrides.note === undefined ? {} : { note: overrides.note }),
    ...(overrides.idempotencyKey === undefined ? {} : { idempotencyKey: overrides.idempotencyKey }),
    ...(overrides.network === undefined ? {} : { network: overrides.network }),
  };
}

/** The plain code of a payout, as the notifier received it to email (SendPayoutVerificationEmail). */
export async function codeOf(h: Harness, payoutId: string): Promise<string> {
  const code = h.notifier.payoutCode(payoutId);
  if (!code) throw new Error(`no verification email for payout ${payoutId}`);
  return code;
}

/** A 6-digit code that is not `code`. */
export function wrongCode(code: string): string {
  return String((Number(code) + 1) % 1_000_000).padStart(6, '0');
}

export interface BalanceView {
  available: string;
  pending: string;
  total: string;
}

/** The project's balance in `currency` on `network` (default: the currency's default network; "0"s when it has none). */
export async function balanceOf(h: Harness, project: FakeProject, currency: string, network?: string): Promise<BalanceView> {
  const res = await h.client.getBalance({ projectId: project.id, environment: environmentOf(project) });
  const on = network ?? (isCryptoCode(currency) ? DEFAULT_NETWORK[currency] : '');
  const found = res.balances.find((b) => b.currency === currency && b.network === on);
  return found ? { available: found.available, pending: found.pending, total: found.total } : { available: '0', pending: '0', total: '0' };
}

/** Every ledger sum of a balance, to compare with the balances row (the ledger invariant). */
export async function ledgerSums(h: Harness, projectId: string, currency: string): Promise<{ available: string; pending: string }> {
  const [row] = await h.sql<{ available: string; pending: string }[]>`
    select
      coalesce(sum(case kind when 'credit_invoice' then amount when 'hold' then -amount when 'release' then amount else 0 end), 0)::text as available,
      coalesce(sum(case kind when 'hold' then amount when 'release' then -amount when 'debit' then -amount else 0 end), 0)::text as pending
    from ledger_entries where project_id = ${projectId} and currency = ${currency}`;
  return { available: formatPlain(new Decimal(row!.available)), pending: formatPlain(new Decimal(row!.pending)) };
}

export { rejection, sleep, waitFor } from '../../../../test/support/async';

/** Runs `task` over 0…count-1 with at most `limit` in flight; results in order. */
export async function mapLimit<R>(count: number, limit: number, task: (index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(count);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, count) }, async () => {
    while (next < count) {
      const index = next++;
      results[index] = await task(index);
    }
  });
  await Promise.all(lanes);
  return results;
}

export type { Payout };
