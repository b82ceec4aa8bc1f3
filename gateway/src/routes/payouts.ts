/**
 * Payouts (service description, endpoint 4): balance, request, verify, history and cancel, with an
 * API key (the key's project) or a merchant JWT (then `projectId` is required and must be one of
 * the merchant's projects); and the operators' claim, complete and reject (admin JWT).
 *
 * Which project: an API key names its own; a `projectId` naming another project answers 404
 * `not_found` on the field projectId. With a JWT, a `projectId` that is not the merchant's (another
 * merchant's, or none at all) answers the same 404, so the answer says nothing about other
 * merchants' projects. The project's environment (sandbox or live) comes from the key or from auth.
 */
import { decimalAsJsonNumber, decimalToJsonNumber } from '@coinvoice/domain/json-money';
import { writtenDecimal } from '../exact-json';
import type { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { PayoutStatus, type GetBalanceResponse, type Payout, type PayoutService } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { merchantPrincipal, type authHooks } from '../auth/hooks';
import { environmentName, environmentOf, isoTime, isoTimeOrNull, publicNames } from '../json';
import { HttpProblem, unknownProject, withRuleViolations } from '../problem';
import { IdParams, parseLimit } from '../schemas/common';
import { IdempotencyKeyHeaders } from '../schemas/invoice';
import {
  BalanceSchema,
  CompletePayoutBody,
  OperatorPayoutListSchema,
  OperatorPayoutQuery,
  PayoutHistoryQuery,
  PayoutHistorySchema,
  PayoutSchema,
  ProjectBody,
  ProjectQuery,
  CreditMissingSchema,
  LedgerCheckSchema,
  RejectPayoutBody,
  RequestPayoutBody,
  VerifyPayoutBody,
} from '../schemas/payouts';

export interface PayoutRouteDeps {
  auth: Client<typeof AuthService>;
  payouts: Client<typeof PayoutService>;
  hooks: ReturnType<typeof authHooks>;
}

const payoutStatuses = publicNames('payout status', [
  [PayoutStatus.AWAITING_VERIFICATION, 'AwaitingVerification'],
  [PayoutStatus.PENDING, 'Pending'],
  [PayoutStatus.COMPLETED, 'Completed'],
  [PayoutStatus.REJECTED, 'Rejected'],
  [PayoutStatus.CANCELLED, 'Cancelled'],
] as const);

/** The service description's Payout object, field for field. */
export function payoutJson(p: Payout | undefined) {
  if (!p) throw new Error('payout missing from a service response');
  return {
    id: p.id,
    amount: decimalToJsonNumber(p.amount),
    currency: p.currency,
    network: p.network,
    address: p.address,
    note: p.note ?? '',
    status: payoutStatuses.name(p.status),
    transactionHash: p.transactionHash ?? null,
    adminNote: p.adminNote ?? null,
    createdAt: isoTime(p.createdAt),
    environment: environmentName(p.environment),
    // Claimed by an operator (or processor): the coins may be on their way, cancel answers 409.
    processing: p.status === PayoutStatus.PENDING && p.claimedAt !== undefined,
    // The treasury's additions (docs/treasury.md).
    confirmations: p.confirmations ?? null,
    origin: payoutOrigin(p.origin),
    approvedAt: isoTimeOrNull(p.approvedAt),
  };
}

function payoutOrigin(origin: string): 'merchant' | 'auto_sweep' {
  if (origin === 'merchant' || origin === 'auto_sweep') return origin;
  throw new Error(`unknown payout origin ${JSON.stringify(origin)} in a service response`);
}

/**
 * The balance body as exact JSON text: a balance is a sum without bound, which a double may not
 * hold exactly, so each amount is written as the decimal's own digits (JSON.parse reads the
 * nearest double; a decimal-aware client the exact value) instead of failing or rounding, and
 * again as exact decimal strings (`…Decimal`) for clients whose parser has only doubles.
 */
export function balanceJsonText(res: GetBalanceResponse): string {
  const balances = res.balances.map(
    (b) =>
      `{"currency":${JSON.stringify(b.currency)},"network":${JSON.stringify(b.network)},"available":${decimalAsJsonNumber(b.available)},"pending":${decimalAsJsonNumber(b.pending)},"total":${decimalAsJsonNumber(b.total)},` +
      `"availableDecimal":"${decimalAsJsonNumber(b.available)}","pendingDecimal":"${decimalAsJsonNumber(b.pending)}","totalDecimal":"${decimalAsJsonNumber(b.total)}"}`,
  );
  return `{"projectId":${JSON.stringify(res.projectId)},"environment":${JSON.stringify(environmentName(res.environment))},"balances":[${balances.join(',')}]}`;
}

interface ProjectScope {
  projectId: string;
  environment: 'live' | 'sandbox';
}

/** The project a payout request acts on (see the file comment). */
async function scopeOf(auth: PayoutRouteDeps['auth'], req: FastifyRequest, projectId: string | undefined): Promise<ProjectScope> {
  const principal = req.principal;
  if (principal?.kind === 'api_key') {
    if (projectId !== undefined && projectId.toLowerCase() !== principal.projectId.toLowerCase()) {
      throw unknownProject('is not the project of this API key');
    }
    return { projectId: principal.projectId, environment: principal.environment };
  }
  if (principal?.kind !== 'merchant') throw new Error('payout routes require x-api-key or bearer authentication but no hook set it');
  if (projectId === undefined) {
    throw new HttpProblem(400, 'validation_failed', 'projectId is required with a merchant session token', [
      { field: 'projectId', message: 'is required with a merchant session token (Bearer); with an x-api-key it may be left out' },
    ]);
  }
  try {
    const { project } = await auth.getProject({ merchantId: principal.merchantId, projectId });
    if (!project) throw new Error('project missing from a service response');
    return { projectId: project.id, environment: environmentName(project.environment) };
  } catch (err) {
    const code = ConnectError.from(err).code;
    if (code === Code.NotFound || code === Code.InvalidArgument) throw unknownProject('is not one of your projects');
    throw err;
  }
}

/** `holder[key]` as the decimal the client wrote: a string goes on as is (the service checks its form), a number digit for digit (`writtenDecimal`). */
export function amountDecimal(holder: object, key: string, field = key): string {
  const amount = (holder as Record<string, unknown>)[key];
  if (typeof amount === 'string') return amount;
  try {
    return writtenDecimal(holder, key);
  } catch {
    throw new HttpProblem(400, 'validation_failed', 'the request body is invalid', [{ field, message: 'must be a finite number' }]);
  }
}

const payoutAuth: Array<Record<string, string[]>> = [{ apiKeyAuth: [] }, { bearerAuth: [] }];
const bearer = [{ bearerAuth: [] }];

/**
 * The ledger check reads every reported credit, and credit-missing then credits one transaction
 * each: minutes on a large ledger, not the 5 s of an ordinary call (a review: the operator lost
 * the list of what was credited while the service went on).
 */
const LEDGER_CALL_TIMEOUT_MS = 10 * 60_000;

export function payoutRoutes(app: FastifyInstance, { auth, payouts, hooks }: PayoutRouteDeps): void {
  app.get<{ Querystring: ProjectQuery }>('/api/payout/balance', {
    schema: {
      tags: ['payouts'],
      summary: 'Balances per (currency, network): available, pending (held by open payouts) and total',
      security: payoutAuth,
      querystring: ProjectQuery,
      response: { 200: BalanceSchema },
    },
    onRequest: hooks.apiKeyOrMerchant,
    handler: async (req, reply) => {
      const scope = await scopeOf(auth, req, req.query.projectId);
      const res = await payouts.getBalance({ projectId: scope.projectId, environment: environmentOf(scope.environment) });
      return reply.type('application/json; charset=utf-8').send(balanceJsonText(res));
    },
  });

  app.post<{ Body: RequestPayoutBody; Headers: { 'idempotency-key'?: string } }>('/api/payout/request', {
    schema: {
      tags: ['payouts'],
      summary: 'Request a payout: the amount is held at once and a verification code is emailed to the merchant',
      security: payoutAuth,
      headers: IdempotencyKeyHeaders,
      body: RequestPayoutBody,
      response: { 201: PayoutSchema },
    },
    onRequest: hooks.apiKeyOrMerchant,
    // A body the schema refuses is answered in the handler, with the payout rules' violations too.
    attachValidation: true,
    handler: async (req, reply) => {
      if (req.validationError) {
        throw await withRuleViolations(req.validationError, req.body, async (fields, flagged) => {
          const text = (name: string) => (typeof fields[name] === 'string' && !flagged.has(name) ? (fields[name] as string) : undefined);
          const scope = await scopeOf(auth, req, text('projectId'));
          const amount = fields.amount;
          return payouts.requestPayout({
            projectId: scope.projectId,
            environment: environmentOf(scope.environment),
            validateOnly: true,
            amount: flagged.has('amount') ? '' : typeof amount === 'number' ? amountDecimal(fields, 'amount') : typeof amount === 'string' ? amount : '',
            currency: text('currency') ?? '',
            network: text('network'),
            address: text('address') ?? '',
            note: text('note'),
          });
        });
      }
      const amount = amountDecimal(req.body, 'amount');
      const scope = await scopeOf(auth, req, req.body.projectId);
      const res = await payouts.requestPayout({
        projectId: scope.projectId,
        environment: environmentOf(scope.environment),
        amount,
        currency: req.body.currency,
        network: req.body.network,
        address: req.body.address,
        note: req.body.note,
        idempotencyKey: req.headers['idempotency-key'],
      });
      if (res.idempotentReplay) reply.header('idempotent-replayed', 'true');
      return reply.code(201).send(payoutJson(res.payout));
    },
  });

  app.post<{ Body: VerifyPayoutBody }>('/api/payout/verify', {
    schema: {
      tags: ['payouts'],
      summary: 'Confirm a payout with the emailed code: AwaitingVerification → Pending',
      description:
        'A wrong code answers 400 invalid_verification_code with the attempts left; the 5th wrong code cancels the payout and releases its amount. An expired code (15 minutes) cancels it too (409 verification_code_expired).',
      security: payoutAuth,
      body: VerifyPayoutBody,
      response: { 200: PayoutSchema },
    },
    onRequest: hooks.apiKeyOrMerchant,
    handler: async (req) => {
      const scope = await scopeOf(auth, req, req.body.projectId);
      const res = await payouts.verifyPayout({ projectId: scope.projectId, payoutId: req.body.payoutId, code: req.body.code });
      return payoutJson(res.payout);
    },
  });

  app.get<{ Querystring: PayoutHistoryQuery }>('/api/payout/history', {
    schema: {
      tags: ['payouts'],
      summary: 'The project’s payouts, newest first, optionally by status (cursor pagination)',
      security: payoutAuth,
      querystring: PayoutHistoryQuery,
      response: { 200: PayoutHistorySchema },
    },
    onRequest: hooks.apiKeyOrMerchant,
    handler: async (req) => {
      const scope = await scopeOf(auth, req, req.query.projectId);
      const res = await payouts.listPayouts({
        projectId: scope.projectId,
        status: req.query.status ? payoutStatuses.value(req.query.status) : undefined,
        pageSize: parseLimit(req.query.limit),
        cursor: req.query.cursor ?? '',
      });
      return { items: res.payouts.map(payoutJson), nextCursor: res.nextCursor || null };
    },
  });

  app.get<{ Params: { id: string }; Querystring: ProjectQuery }>('/api/payout/:id', {
    schema: {
      tags: ['payouts'],
      summary: 'One payout of the project: its status, and while it is being sent its transactionHash and confirmations',
      description: 'A payout of another project answers 404 not_found, as if it did not exist.',
      security: payoutAuth,
      params: IdParams,
      querystring: ProjectQuery,
      response: { 200: PayoutSchema },
    },
    onRequest: hooks.apiKeyOrMerchant,
    handler: async (req) => {
      const scope = await scopeOf(auth, req, req.query.projectId);
      const res = await payouts.getPayout({ projectId: scope.projectId, payoutId: req.params.id });
      return payoutJson(res.payout);
    },
  });

  app.post<{ Params: { id: string }; Body: ProjectBody }>('/api/payout/:id/cancel', {
    schema: {
      tags: ['payouts'],
      summary: 'Cancel an AwaitingVerification or Pending payout; its amount is released',
      description: 'A Pending payout an operator has claimed (processing: true) can no longer be cancelled: 409 payout_in_flight.',
      security: payoutAuth,
      params: IdParams,
      body: ProjectBody,
      response: { 200: PayoutSchema },
    },
    onRequest: hooks.apiKeyOrMerchant,
    handler: async (req) => {
      const scope = await scopeOf(auth, req, req.body?.projectId);
      const res = await payouts.cancelPayout({ projectId: scope.projectId, payoutId: req.params.id });
      return payoutJson(res.payout);
    },
  });

  app.get<{ Querystring: OperatorPayoutQuery }>('/api/admin/payouts', {
    schema: {
      tags: ['admin'],
      summary: 'Operators: every project’s payouts, oldest first, by status and environment (the queue: status=Pending&environment=live)',
      security: bearer,
      querystring: OperatorPayoutQuery,
      response: { 200: OperatorPayoutListSchema },
    },
    onRequest: hooks.admin,
    handler: async (req) => {
      const res = await payouts.listAllPayouts({
        status: req.query.status ? payoutStatuses.value(req.query.status) : undefined,
        environment: req.query.environment ? environmentOf(req.query.environment) : undefined,
        pageSize: parseLimit(req.query.limit),
        cursor: req.query.cursor ?? '',
        operatorToken: merchantPrincipal(req).token,
      });
      return { items: res.payouts.map((p) => ({ ...payoutJson(p), projectId: p.projectId })), nextCursor: res.nextCursor || null };
    },
  });

  app.post<{ Params: { id: string } }>('/api/admin/payouts/:id/claim', {
    schema: {
      tags: ['admin'],
      summary: 'Operators: claim a Pending payout before sending its coins ("Start sending"); the merchant can no longer cancel it',
      description:
        'The payout stays Pending with processing: true; a cancel then answers 409 payout_in_flight. Complete requires the claim (409 payout_not_claimed without it). A payout already claimed answers 409 payout_already_claimed; one not Pending 409 payout_not_pending.',
      security: bearer,
      params: IdParams,
      response: { 200: PayoutSchema },
    },
    onRequest: hooks.admin,
    handler: async (req) => {
      const res = await payouts.claimPayout({ payoutId: req.params.id, operatorToken: merchantPrincipal(req).token });
      return payoutJson(res.payout);
    },
  });

  app.post<{ Params: { id: string } }>('/api/admin/payouts/:id/approve', {
    schema: {
      tags: ['admin'],
      summary: 'Operators: approve a live verified Pending payout above the automatic maximum (PAYOUT_AUTO_MAX_<ASSET>): the processor then sends it',
      description:
        'Only a live Pending payout nobody has claimed yet can be approved; anything else answers 409 payout_not_pending. Approving an approved payout again answers it unchanged (idempotent, 200).',
      security: bearer,
      params: IdParams,
      response: { 200: PayoutSchema },
    },
    onRequest: hooks.admin,
    handler: async (req) => {
      const res = await payouts.approvePayout({ payoutId: req.params.id, operatorToken: merchantPrincipal(req).token });
      return payoutJson(res.payout);
    },
  });

  app.post<{ Params: { id: string }; Body: CompletePayoutBody }>('/api/admin/payouts/:id/complete', {
    schema: {
      tags: ['admin'],
      summary: 'Operators: mark a claimed Pending payout as sent (Completed) with its transaction hash; the amount is debited once',
      description:
        'Requires the claim (409 payout_not_claimed); a payout the treasury processor is sending is completed by the chain only (409 payout_sent_by_processor). A transaction completes one payout only (409 transaction_already_used). With the payout chain’s node configured (Ethereum, Bitcoin/Litecoin Esplora, Tron), the transaction is checked on chain: mined (409 transaction_not_found), succeeded (422 transaction_failed), paying the destination exactly the amount (422 transaction_mismatch); 503 chain_unavailable when the node cannot be asked.',
      security: bearer,
      params: IdParams,
      body: CompletePayoutBody,
      response: { 200: PayoutSchema },
    },
    onRequest: hooks.admin,
    handler: async (req) => {
      const res = await payouts.completePayout({
        payoutId: req.params.id,
        transactionHash: req.body.transactionHash,
        operatorToken: merchantPrincipal(req).token,
      });
      return payoutJson(res.payout);
    },
  });

  app.post<{ Params: { id: string }; Body: RejectPayoutBody }>('/api/admin/payouts/:id/reject', {
    schema: {
      tags: ['admin'],
      summary: 'Operators: refuse a Pending payout (claimed or not: only when nothing was sent) with a note to the merchant; the amount is released',
      description: 'A payout the treasury processor is sending (claimed by processor:<network>) is finished by the chain, never by an operator: 409 payout_sent_by_processor.',
      security: bearer,
      params: IdParams,
      body: RejectPayoutBody,
      response: { 200: PayoutSchema },
    },
    onRequest: hooks.admin,
    handler: async (req) => {
      const res = await payouts.rejectPayout({ payoutId: req.params.id, adminNote: req.body.adminNote, operatorToken: merchantPrincipal(req).token });
      return payoutJson(res.payout);
    },
  });

  app.post('/api/admin/ledger/check', {
    schema: {
      tags: ['admin'],
      summary: 'Operators: check the ledger invariants now (also run hourly): balances equal their entries, every reported credit is in the ledger exactly once, no credit lacks a payment',
      security: bearer,
      response: { 200: LedgerCheckSchema },
    },
    onRequest: hooks.admin,
    handler: async (req) => {
      const res = await payouts.checkLedgerInvariants({ operatorToken: merchantPrincipal(req).token }, { timeoutMs: LEDGER_CALL_TIMEOUT_MS });
      return { violations: res.violations.map((v) => ({ kind: v.kind, detail: v.detail })), balancesChecked: Number(res.balancesChecked), creditsChecked: Number(res.creditsChecked) };
    },
  });

  app.post('/api/admin/ledger/credit-missing', {
    schema: {
      tags: ['admin'],
      summary: 'Operators: credit what the ledger check finds missing (credit_missing), each as its invoice.paid or late-payment event would have; a second call, or the event arriving later, credits nothing more',
      security: bearer,
      response: { 200: CreditMissingSchema },
    },
    onRequest: hooks.admin,
    handler: async (req) => {
      const res = await payouts.creditMissing({ operatorToken: merchantPrincipal(req).token }, { timeoutMs: LEDGER_CALL_TIMEOUT_MS });
      return {
        credited: res.credited.map((c) => ({ invoiceId: c.invoiceId, projectId: c.projectId, paymentId: c.paymentId || null, currency: c.currency, network: c.network, amount: c.amount })),
        skipped: res.skipped.map((s) => ({ kind: 'credit_missing' as const, detail: s.detail })),
      };
    },
  });
}
