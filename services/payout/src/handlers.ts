/**
 * coinvoice.payout.v1.PayoutService. Error codes per RPC (ErrorDetail.code, Connect code):
 * - GetBalance: validation_failed (InvalidArgument).
 * - RequestPayout: validation_failed (violations by public field: amount, currency, network,
 *   address, note, projectId, environment, idempotencyKey), not_found (auth does not know the project),
 *   insufficient_balance (FailedPrecondition → 409), idempotency_key_reused (FailedPrecondition,
 *   HTTP 422 by code), service_unavailable when auth or invoice (FindHouseAddress) cannot be asked.
 * - VerifyPayout: validation_failed (code not 6 digits: costs no attempt), not_found,
 *   invalid_verification_code (InvalidArgument → 400, violation on `code` with the attempts left;
 *   the 5th cancels the payout), verification_code_expired (FailedPrecondition; the payout is
 *   cancelled), payout_not_verifiable (409) unless AwaitingVerification.
 * - ListPayouts: validation_failed (projectId, status, pageSize, cursor).
 * - CancelPayout: validation_failed, not_found, payout_not_cancellable (409), payout_in_flight (409:
 *   an operator claimed it, the coins may be on their way).
 * - ClaimPayout: validation_failed, not_found, payout_not_pending, payout_already_claimed (409).
 * - CompletePayout / RejectPayout: validation_failed (transactionHash per chain / adminNote),
 *   not_found, payout_not_pending (409); Complete also payout_not_claimed (409: claim first),
 *   transaction_already_used (409: the hash completed another payout), and with a chain node the
 *   on-chain check's codes (services/chains/src/payout-check.ts).
 * - ListAllPayouts (operators; the gateway checks the operator claim): validation_failed (status,
 *   environment, pageSize, cursor).
 * - GetPayout: validation_failed, not_found.
 * - Auto-sweep (src/auto-sweep.ts) and the operators' treasury RPCs (src/treasury.ts): their
 *   errors are listed in services/payout/README.md.
 * Another project's payout is not_found, as if it did not exist.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { type DescMessage, type MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError, type Client, type ServiceImpl } from '@connectrpc/connect';
import { decodeBinary, encodeBinary, enforceRateLimit, enqueueEvent, eventTransaction, errors, invalidRequest, requireValid, serviceError, type Logger, type RateLimitPolicy, type RateLimitStore, type Sql, type TransactionSql } from '@coinvoice/runtime';
import { environmentFromProto, environmentToProto } from '@coinvoice/domain/environment';
import { Decimal, formatPlain } from '@coinvoice/domain/money';
import type { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import type { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  PayoutSchema,
  type CancelPayoutRequest,
  type CancelPayoutResponseSchema,
  type ClaimPayoutRequest,
  type ClaimPayoutResponseSchema,
  type CompletePayoutRequest,
  type CompletePayoutResponseSchema,
  type GetBalanceRequest,
  type GetBalanceResponseSchema,
  type CheckLedgerInvariantsRequest,
  type CheckLedgerInvariantsResponseSchema,
  type CreditMissingRequest,
  type CreditMissingResponseSchema,
  type MissingCreditSchema,
  type ListAllPayoutsRequest,
  type ListAllPayoutsResponseSchema,
  type ListPayoutsRequest,
  type ListPayoutsResponseSchema,
  type Payout,
  type PayoutService,
  type RejectPayoutRequest,
  type RejectPayoutResponseSchema,
  type RequestPayoutRequest,
  type RequestPayoutResponseSchema,
  type VerifyPayoutRequest,
  type VerifyPayoutResponseSchema,
  type ApprovePayoutRequest,
  type ApprovePayoutResponseSchema,
  type GetAutoSweepRequest,
  type GetAutoSweepResponseSchema,
  type GetPayoutRequest,
  type GetPayoutResponseSchema,
  type GetTreasuryRequest,
  type GetTreasuryResponseSchema,
  type ListSweepTasksRequest,
  type ListSweepTasksResponseSchema,
  type SetAutoSweepRequest,
  type SetAutoSweepResponseSchema,
  type SetTreasuryPausedRequest,
  type SetTreasuryPausedResponseSchema,
  type VerifyAutoSweepRequest,
  type VerifyAutoSweepResponseSchema,
} from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { AutoSweepHandlers } from './auto-sweep';
import { TreasuryHandlers, type TreasuryDeps } from './treasury';
import { CODE_MAX_ATTEMPTS, codeMatches, issueCode } from './domain/code';
import { checkTransactionHash, OPERATOR_QUEUE_CURSORS, PAYOUT_CURSORS, storedMethod, validateBalanceQuery, validateCompletePayout, validateListPayouts, validateOperatorList, validateOperatorPayoutRef, validatePayoutRef, validateRejectPayout, validateRequestPayout, validateVerifyPayout, type NewPayoutRequest } from './domain/requests';
import { decide, isSentByProcessor, stageOf } from './domain/status';
import { payoutRequestedEvent } from './events/payout-events';
import type { PayoutMetrics } from './metrics';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { balanceToProto, payoutToProto, PAYOUT_STATUS } from './proto';
import { payoutIdempotencyKeys } from './store/idempotency';
import { availableBalance, hold, listBalances } from './store/ledger';
import {
  countOpenUnverified,
  findPayout,
  findPayoutById,
  insertPayout,
  listAllPayouts,
  listPayouts,
  lockPayout,
  lockProjectPayouts,
  recordPayoutTransaction,
  treasuryTransactionOf,
  useAttempt,
  type PayoutRow,
} from './store/payouts';
import { applyTrigger } from './transitions';
import { checkLedgerInvariants, type LedgerCheckDeps } from './invariants/ledger-check';
import { creditReported } from './events/ledger-consumer';
import type { PayoutChainCheck } from '@coinvoice/chains/payout-check';
import { isEvmChain } from '@coinvoice/chains/evm/networks';
import { refuseHouseDestination, type HouseAddressLookup } from './house-addresses';
import type { PayoutMinimums } from './domain/requests';

type Reply<Schema extends DescMessage> = Promise<MessageInitShape<Schema>>;

export interface PayoutHandlerDeps {
  sql: Sql;
  /**
   * GetProjectContext: the merchant's email (and the project's environment, as a cross-check);
   * VerifyOperatorToken: operator actions are checked here again, not only at the gateway.
   */
  auth: Pick<Client<typeof AuthService>, 'getProjectContext' | 'verifyOperatorToken'>;
  /** Emails the verification code: the only way the plain code leaves this service. */
  notifier: Pick<Client<typeof NotifierService>, 'sendPayoutVerificationEmail' | 'sendAutoSweepVerificationEmail'>;
  logger: Logger;
  codeTtlMs: number;
  /** Payouts of one project that may await verification at once (each one is 5 guesses at a code). */
  maxOpenUnverified: number;
  /** Per-project limits (docs/architecture.md#rate-limits), counted in Postgres across replicas. */
  rateLimits: {
    store: RateLimitStore;
    verifyPerProject: RateLimitPolicy;
    requestPerProject: RateLimitPolicy;
    autoSweepVerifyPerProject: RateLimitPolicy;
    autoSweepCodePerProject: RateLimitPolicy;
  };
  metrics?: PayoutMetrics;
  /** The ledger invariant check (docs/accounting.md), run on an operator's demand. */
  ledgerCheck: LedgerCheckDeps;
  /** With a chain node configured: Complete checks the transaction pays the payout (services/chains/src/payout-check.ts). */
  chainCheck?: PayoutChainCheck;
  /** The Treasury page's settings: PAYOUT_AUTO_MAX_<ASSET> and the nodes it reads balances from. */
  treasury: Pick<TreasuryDeps, 'autoMax' | 'balances' | 'unconfiguredReason'>;
  /** Told of each auto-sweep payout created by a configuration change (metrics). */
  onAutoSwept?: (payout: PayoutRow) => void;
  /** Whether coinvoice holds an address itself: no payout goes there (docs/treasury.md#house-addresses). */
  houseAddress: HouseAddressLookup;
  /** PAYOUT_MIN_<CODE>: the smallest live payout (and live auto-sweep threshold) per coin. */
  liveMinimums: PayoutMinimums;
}

const payoutNotFound = () => errors.notFound('payout');

/** What a verification attempt decided; errors are thrown only after its transaction committed. */
type VerifyOutcome =
  | { kind: 'verified'; payout: PayoutRow }
  | { kind: 'wrong_code'; attemptsLeft: number }
  | { kind: 'attempts_exhausted' }
  | { kind: 'expired' };

/** How a refused completion names the treasury's transaction (store/payouts.ts treasuryTransactionOf). */
const TREASURY_TRANSFER_WORDS: Record<string, string> = {
  payout: 'transfer for another payout',
  sweep: 'sweep',
  gas_top_up: 'gas top-up',
  'utxo batch': 'payout batch (its outputs complete their own payouts)',
};

export class PayoutHandlers implements ServiceImpl<typeof PayoutService> {
  private readonly autoSweep: AutoSweepHandlers;
  private readonly treasury: TreasuryHandlers;

  constructor(private readonly deps: PayoutHandlerDeps) {
    this.autoSweep = new AutoSweepHandlers({
      sql: deps.sql,
      notifier: deps.notifier,
      logger: deps.logger,
      codeTtlMs: deps.codeTtlMs,
      rateLimits: { store: deps.rateLimits.store, verifyPerProject: deps.rateLimits.autoSweepVerifyPerProject, codePerProject: deps.rateLimits.autoSweepCodePerProject },
      merchantEmail: (scope) => this.merchantEmail(scope),
      onSwept: deps.onAutoSwept,
      houseAddress: deps.houseAddress,
      liveMinimums: deps.liveMinimums,
    });
    this.treasury = new TreasuryHandlers({ sql: deps.sql, logger: deps.logger, operator: (token) => this.operator(token), ...deps.treasury });
  }

  async getPayout(req: GetPayoutRequest): Reply<typeof GetPayoutResponseSchema> {
    const ref = requireValid(validatePayoutRef(req));
    const row = await findPayout(this.deps.sql, ref.projectId, ref.payoutId);
    if (!row) throw payoutNotFound();
    return { payout: payoutToProto(row) };
  }

  approvePayout(req: ApprovePayoutRequest): Reply<typeof ApprovePayoutResponseSchema> {
    return this.treasury.approvePayout(req);
  }

  listSweepTasks(req: ListSweepTasksRequest): Reply<typeof ListSweepTasksResponseSchema> {
    return this.treasury.listSweepTasks(req);
  }

  getTreasury(req: GetTreasuryRequest): Reply<typeof GetTreasuryResponseSchema> {
    return this.treasury.getTreasury(req);
  }

  setTreasuryPaused(req: SetTreasuryPausedRequest): Reply<typeof SetTreasuryPausedResponseSchema> {
    return this.treasury.setTreasuryPaused(req);
  }

  getAutoSweep(req: GetAutoSweepRequest): Reply<typeof GetAutoSweepResponseSchema> {
    return this.autoSweep.get(req);
  }

  setAutoSweep(req: SetAutoSweepRequest): Reply<typeof SetAutoSweepResponseSchema> {
    return this.autoSweep.set(req);
  }

  verifyAutoSweep(req: VerifyAutoSweepRequest): Reply<typeof VerifyAutoSweepResponseSchema> {
    return this.autoSweep.verify(req);
  }

  async getBalance(req: GetBalanceRequest): Reply<typeof GetBalanceResponseSchema> {
    const query = requireValid(
      validateBalanceQuery({ projectId: req.projectId, environment: environmentFromProto(req.environment) ?? `unspecified (${req.environment})` }),
    );
    const rows = await listBalances(this.deps.sql, query.projectId, query.environment);
    return { projectId: query.projectId, environment: environmentToProto(query.environment), balances: rows.map(balanceToProto) };
  }

  async requestPayout(req: RequestPayoutRequest): Reply<typeof RequestPayoutResponseSchema> {
    const input = {
      projectId: req.projectId,
      environment: environmentFromProto(req.environment) ?? `unspecified (${req.environment})`,
      amount: req.amount,
      currency: req.currency,
      address: req.address,
      note: req.note,
      idempotencyKey: req.idempotencyKey,
      network: req.network,
    };
    const checked = validateRequestPayout({ ...input, liveMinimums: this.deps.liveMinimums });
    if (req.validateOnly) {
      requireValid(checked);
      return {};
    }
    // A retry of a request already answered (its Idempotency-Key stored) is answered before the
    // limit counts it: a client recovering from a lost answer learns its payout, and spends none of
    // the project's requests on it (the key-reused refusal likewise creates nothing). It replays
    // even when a rule of the service changed since (a PAYOUT_MIN_<COIN> raised): it was answered.
    const answered = checked.ok ? checked : validateRequestPayout(input);
    if (answered.ok && answered.value.idempotencyKey !== undefined && (await payoutIdempotencyKeys.find(this.deps.sql, answered.value.projectId, answered.value.idempotencyKey))) {
      const payout = await this.deps.sql.begin((tx) => this.replay(tx, answered.value));
      this.deps.metrics?.idempotentReplays.inc();
      return { payout, idempotentReplay: true };
    }
    const request = requireValid(checked);
    const limited = request.projectId.toLowerCase();
    try {
      await enforceRateLimit(this.deps.rateLimits.store, this.deps.rateLimits.requestPerProject, limited);
    } catch (refused) {
      // A retry sent while the first request with its key is still in flight was counted before
      // that key was stored: it waits for the first and answers its outcome, never a 429, and its
      // count is taken back (docs/accounting.md#payout-requests).
      const replayed = await this.replayOfConcurrentTwin(request);
      if (replayed === undefined) throw refused;
      await this.deps.rateLimits.store.refund(this.deps.rateLimits.requestPerProject, limited);
      this.deps.metrics?.idempotentReplays.inc();
      return { payout: replayed, idempotentReplay: true };
    }
    // After the limit: whether an address is coinvoice's is asked at the request rate only.
    await refuseHouseDestination(this.deps.houseAddress, request.address, 'address');
    // Auth before the transaction: a slow call must not hold locks.
    const email = await this.merchantEmail(request);

    const payoutId = randomUUID();
    const outcome = await eventTransaction(this.deps.sql, async (tx) => {
      // Serialises this project's requests, so the open-payout count below cannot race.
      await lockProjectPayouts(tx, request.projectId);
      if (request.idempotencyKey !== undefined) {
        const claimed = await payoutIdempotencyKeys.claim(tx, {
          projectId: request.projectId,
          key: request.idempotencyKey,
          requestHash: request.fingerprint,
          resourceId: payoutId,
        });
        if (!claimed) return { replayOf: await this.replay(tx, request) };
      }
      if ((await countOpenUnverified(tx, request.projectId)) >= this.deps.maxOpenUnverified) {
        throw errors.conflict(
          'too_many_unverified_payouts',
          `at most ${this.deps.maxOpenUnverified} payouts may await verification at once: verify or cancel one first`,
        );
      }
      const amount = formatPlain(request.amount);
      // The (currency, network) balance: USDT on bsc pays out of the bsc balance only (docs/accounting.md).
      const key = { projectId: request.projectId, environment: request.environment, currency: request.currency.code, network: request.currency.chain };
      const insufficient = (available: string) => {
        // Thrown inside: the transaction (and the idempotency key's claim) rolls back.
        this.deps.metrics?.refusedInsufficient.inc();
        return errors.conflict(
          'insufficient_balance',
          `the available ${key.currency} balance on ${key.network} (${available}) does not cover the payout of ${amount} ${key.currency}`,
        );
      };
      // Refused before a code is emailed; the hold below decides again, under the balance's lock.
      const available = await availableBalance(tx, key);
      if (new Decimal(available).lessThan(amount)) throw insufficient(available);
      const issued = issueCode(payoutId);
      const row = await insertPayout(tx, {
        id: payoutId,
        projectId: request.projectId,
        environment: request.environment,
        amount,
        currency: request.currency.code,
        network: request.currency.chain,
        address: request.address,
        note: request.note ?? null,
        codeHash: issued.hash,
        codeSalt: issued.salt,
        codeTtlMs: this.deps.codeTtlMs,
        codeAttempts: CODE_MAX_ATTEMPTS,
      });
      // Inside the transaction, so that a payout whose email could not be sent never existed; and
      // before the hold (docs/accounting.md#payout-requests): the hold locks the balance row every
      // credit of this balance waits on, and the email may take seconds. The code goes to the
      // notifier in this call only, never into the outbox, a stream or a log.
      await this.emailCode(row, email, issued.code);
      // The hold's ledger entry references the payout inserted above.
      const held = await hold(tx, key, payoutId, amount);
      if (!held.ok) {
        // An auto-sweep took the balance during the email (docs/accounting.md#payout-requests).
        this.deps.logger.warn({ payoutId, projectId: request.projectId, currency: key.currency, network: key.network }, 'payout refused after its code was emailed: the balance was swept meanwhile');
        throw insufficient(held.available);
      }
      await enqueueEvent(tx, payoutRequestedEvent(row));
      const payout = payoutToProto(row);
      if (request.idempotencyKey !== undefined) {
        await payoutIdempotencyKeys.saveResponse(tx, request.projectId, request.idempotencyKey, encodeBinary(PayoutSchema, payout));
      }
      return { created: payout };
    });
    if ('replayOf' in outcome) {
      // Counted above while its twin was in flight; a replay spends none of the project's requests.
      await this.deps.rateLimits.store.refund(this.deps.rateLimits.requestPerProject, limited);
      this.deps.metrics?.idempotentReplays.inc();
      return { payout: outcome.replayOf, idempotentReplay: true };
    }
    this.deps.metrics?.requested.inc({ currency: request.currency.code, environment: request.environment });
    this.deps.logger.info(
      { payoutId, projectId: request.projectId, currency: request.currency.code, network: request.currency.chain, amount: formatPlain(request.amount) },
      'payout requested; amount held, verification code issued',
    );
    return { payout: outcome.created, idempotentReplay: false };
  }

  /** The answer of a request in flight with this request's Idempotency-Key, once it has committed; undefined when there is none. */
  private async replayOfConcurrentTwin(request: NewPayoutRequest): Promise<Payout | undefined> {
    if (request.idempotencyKey === undefined) return undefined;
    const claim = { projectId: request.projectId, key: request.idempotencyKey, requestHash: request.fingerprint, resourceId: randomUUID() };
    if (!(await payoutIdempotencyKeys.heldByAnother(this.deps.sql, claim))) return undefined;
    return this.deps.sql.begin((tx) => this.replay(tx, request));
  }

  private async emailCode(row: PayoutRow, email: string, code: string): Promise<void> {
    try {
      await this.deps.notifier.sendPayoutVerificationEmail({
        payoutId: row.id,
        environment: row.environment,
        amount: formatPlain(row.amount),
        currency: row.currency,
        email,
        code,
        expiresAt: timestampFromDate(row.code_expires_at),
        address: row.address,
        network: row.network,
      });
    } catch (err) {
      this.deps.logger.warn({ payoutId: row.id, error: ConnectError.from(err).rawMessage }, 'the verification email could not be sent; payout not created');
      throw serviceError(Code.Unavailable, 'service_unavailable', 'the verification email could not be sent; try again shortly');
    }
  }

  /** The operator behind `token`, checked by auth now (signature, revocation, operator right). */
  private async operator(token: string): Promise<string> {
    if (token === '') throw errors.unauthenticated('invalid_token', 'an operator session token is required');
    try {
      return (await this.deps.auth.verifyOperatorToken({ token })).merchantId;
    } catch (err) {
      const code = ConnectError.from(err).code;
      if (code === Code.Unauthenticated) throw errors.unauthenticated('invalid_token', 'the operator session token is invalid or revoked');
      if (code === Code.PermissionDenied || code === Code.NotFound) throw errors.forbidden('forbidden', 'this operation is for operators');
      throw serviceError(Code.Unavailable, 'service_unavailable', 'the operator could not be checked (auth); try again shortly');
    }
  }

  /** The merchant's email from auth; the project's environment there must be the one the caller named. */
  private async merchantEmail(request: Pick<NewPayoutRequest, 'projectId' | 'environment'>): Promise<string> {
    let context;
    try {
      context = await this.deps.auth.getProjectContext({ projectId: request.projectId });
    } catch (err) {
      const code = ConnectError.from(err).code;
      if (code === Code.NotFound || code === Code.InvalidArgument) throw errors.notFound('project');
      throw serviceError(Code.Unavailable, 'service_unavailable', 'the project directory (auth) could not be asked; try again shortly');
    }
    if (environmentFromProto(context.environment) !== request.environment) {
      throw invalidRequest([{ field: 'environment', message: "is not the project's environment" }]);
    }
    if (request.environment === 'live' && !context.merchantEmailVerified) {
      throw errors.forbidden('email_not_verified', 'verify your email address before requesting live payouts');
    }
    if (context.merchantEmail === '') throw new Error(`auth has no email for the merchant of project ${request.projectId}`);
    return context.merchantEmail;
  }

  /** The first response to this Idempotency-Key, when the body is the same (else refused). */
  private replay(tx: TransactionSql, request: NewPayoutRequest): Promise<Payout> {
    return payoutIdempotencyKeys.replay(
      tx,
      { projectId: request.projectId, key: request.idempotencyKey!, fingerprint: request.fingerprint },
      {
        decode: (response) => decodeBinary(PayoutSchema, response),
        load: async (payoutId) => {
          const row = await findPayout(tx, request.projectId, payoutId);
          return row && payoutToProto(row);
        },
      },
    );
  }

  async verifyPayout(req: VerifyPayoutRequest): Reply<typeof VerifyPayoutResponseSchema> {
    const verify = requireValid(validateVerifyPayout(req));
    // Per project, across payouts: fresh payouts must not give a stolen key unlimited guesses.
    await enforceRateLimit(this.deps.rateLimits.store, this.deps.rateLimits.verifyPerProject, verify.projectId.toLowerCase());
    const outcome = await eventTransaction(this.deps.sql, async (tx): Promise<VerifyOutcome> => {
      const locked = await lockPayout(tx, verify.payoutId, verify.projectId);
      if (!locked) throw payoutNotFound();
      const { payout, now } = locked;
      const decision = decide(stageOf(payout), 'verify');
      if (!decision.ok) throw errors.conflict(decision.code, decision.reason);
      if (!payout.code_hash || !payout.code_salt) throw new Error(`payout ${payout.id} awaits verification without a code`);
      if (payout.code_expires_at.getTime() <= now.getTime()) {
        // Expired but not yet swept: cancel it now, as the sweeper would.
        await applyTrigger(tx, payout, 'expire_code');
        return { kind: 'expired' };
      }
      if (codeMatches(payout.id, verify.code, payout.code_salt, payout.code_hash)) {
        const verified = await applyTrigger(tx, payout, 'verify');
        // Sandbox money is not real: no operator sends it; the sandbox itself claims it and it
        // completes at once with a simulated hash.
        if (verified.environment === 'sandbox') {
          const claimed = await applyTrigger(tx, verified, 'claim', { claimedBy: SANDBOX_PROCESSOR });
          const transactionHash = simulatedTransactionHash(claimed.currency, claimed.network);
          if (!(await recordPayoutTransaction(tx, transactionHash, claimed.id))) throw new Error('a random simulated transaction hash collided');
          return { kind: 'verified', payout: await applyTrigger(tx, claimed, 'complete', { transactionHash }) };
        }
        return { kind: 'verified', payout: verified };
      }
      const attemptsLeft = await useAttempt(tx, payout.id);
      if (attemptsLeft > 0) return { kind: 'wrong_code', attemptsLeft };
      await applyTrigger(tx, { ...payout, code_attempts_left: 0 }, 'exhaust_attempts');
      return { kind: 'attempts_exhausted' };
    });
    const log = this.deps.logger.child({ payoutId: verify.payoutId, projectId: verify.projectId });
    switch (outcome.kind) {
      case 'verified':
        this.deps.metrics?.verified.inc();
        log.info('payout verified; waiting for an operator');
        return { payout: payoutToProto(outcome.payout) };
      case 'wrong_code':
        this.deps.metrics?.wrongCodes.inc();
        log.info({ attemptsLeft: outcome.attemptsLeft }, 'wrong payout verification code');
        throw serviceError(
          Code.InvalidArgument,
          'invalid_verification_code',
          `the verification code is wrong; ${attemptsLeft(outcome.attemptsLeft)} left before the payout is cancelled`,
          [{ field: 'code', message: `is wrong; ${attemptsLeft(outcome.attemptsLeft)} left` }],
        );
      case 'attempts_exhausted':
        this.deps.metrics?.wrongCodes.inc();
        this.deps.metrics?.cancelled.inc({ reason: 'attempts_exhausted' });
        log.warn('wrong payout verification code, no attempts left: payout cancelled, hold released');
        throw serviceError(
          Code.InvalidArgument,
          'invalid_verification_code',
          'the verification code is wrong and no attempts are left: the payout was cancelled and its amount released',
          [{ field: 'code', message: 'is wrong; no attempts left, the payout was cancelled' }],
        );
      case 'expired':
        this.deps.metrics?.cancelled.inc({ reason: 'code_expired' });
        log.info('payout verification code expired: payout cancelled, hold released');
        throw errors.conflict(
          'verification_code_expired',
          'the verification code has expired: the payout was cancelled and its amount released; request a new payout',
        );
    }
  }

  async listPayouts(req: ListPayoutsRequest): Reply<typeof ListPayoutsResponseSchema> {
    const status = req.status === undefined ? undefined : (PAYOUT_STATUS.fromProto(req.status) ?? `unknown (${req.status})`);
    const query = requireValid(validateListPayouts({ projectId: req.projectId, status, pageSize: req.pageSize, cursor: req.cursor }));
    const page = await listPayouts(this.deps.sql, query);
    return { payouts: page.rows.map(payoutToProto), nextCursor: page.nextCursor };
  }

  async listAllPayouts(req: ListAllPayoutsRequest): Reply<typeof ListAllPayoutsResponseSchema> {
    await this.operator(req.operatorToken);
    const status = req.status === undefined ? undefined : (PAYOUT_STATUS.fromProto(req.status) ?? `unknown (${req.status})`);
    const environment = req.environment === Environment.UNSPECIFIED ? undefined : (environmentFromProto(req.environment) ?? `unknown (${req.environment})`);
    const query = requireValid(validateOperatorList({ status, environment, pageSize: req.pageSize, cursor: req.cursor }));
    const page = await listAllPayouts(this.deps.sql, query);
    return { payouts: page.rows.map(payoutToProto), nextCursor: page.nextCursor };
  }

  async checkLedgerInvariants(req: CheckLedgerInvariantsRequest): Reply<typeof CheckLedgerInvariantsResponseSchema> {
    const operatorId = await this.operator(req.operatorToken);
    this.deps.logger.info({ operatorId }, 'ledger invariant check asked by an operator');
    const result = await checkLedgerInvariants(this.deps.ledgerCheck);
    return { violations: result.violations, balancesChecked: BigInt(result.balancesChecked), creditsChecked: BigInt(result.creditsChecked) };
  }

  /**
   * What the check finds missing, credited as its event would have been, each in its own
   * transaction (docs/accounting.md#crediting-what-is-missing). The ledger entry's event id names
   * the repair and the operator; a second call, or the event arriving later, credits nothing more.
   */
  async creditMissing(req: CreditMissingRequest): Reply<typeof CreditMissingResponseSchema> {
    const operatorId = await this.operator(req.operatorToken);
    const { missing } = await checkLedgerInvariants(this.deps.ledgerCheck);
    const credited: MessageInitShape<typeof MissingCreditSchema>[] = [];
    const skipped: { kind: string; detail: string }[] = [];
    for (const credit of missing) {
      const what = `invoice ${credit.invoiceId}${credit.paymentId ? ` payment ${credit.paymentId}` : ' (invoice.paid)'}`;
      const log = this.deps.logger.child({ operatorId, invoiceId: credit.invoiceId, paymentId: credit.paymentId || undefined });
      const eventId = `ledger-repair:${operatorId}:${credit.paymentId || credit.invoiceId}`;
      const outcome = await eventTransaction(this.deps.sql, (tx) => creditReported(tx, credit, eventId, { onAutoSwept: this.deps.onAutoSwept }, log));
      if (!outcome.ok) {
        log.error({ reason: outcome.reason }, 'a missing credit was not credited: the invoice service reported what the ledger cannot take');
        skipped.push({ kind: 'credit_missing', detail: `${what}: ${outcome.reason}` });
      } else if (outcome.credited) {
        const c = outcome.credited;
        log.warn({ projectId: c.projectId, currency: c.currency, network: c.network, amount: c.amount }, 'ledger: a missing credit credited by an operator');
        this.deps.metrics?.credited.inc({ currency: c.currency, environment: c.environment });
        credited.push({ invoiceId: c.invoiceId, projectId: c.projectId, paymentId: c.paymentId ?? '', currency: c.currency, network: c.network, amount: c.amount });
      }
    }
    return { credited, skipped };
  }

  async cancelPayout(req: CancelPayoutRequest): Reply<typeof CancelPayoutResponseSchema> {
    const ref = requireValid(validatePayoutRef(req));
    const row = await eventTransaction(this.deps.sql, async (tx) => {
      const locked = await lockPayout(tx, ref.payoutId, ref.projectId);
      if (!locked) throw payoutNotFound();
      return applyTrigger(tx, locked.payout, 'cancel');
    });
    this.deps.metrics?.cancelled.inc({ reason: 'user' });
    this.deps.logger.info({ payoutId: row.id, projectId: row.project_id }, 'payout cancelled by the merchant; hold released');
    return { payout: payoutToProto(row) };
  }

  async claimPayout(req: ClaimPayoutRequest): Reply<typeof ClaimPayoutResponseSchema> {
    const ref = requireValid(validateOperatorPayoutRef(req));
    const operatorId = await this.operator(req.operatorToken);
    const row = await eventTransaction(this.deps.sql, async (tx) => {
      const locked = await lockPayout(tx, ref.payoutId);
      if (!locked) throw payoutNotFound();
      return applyTrigger(tx, locked.payout, 'claim', { claimedBy: operatorId });
    });
    this.deps.logger.info({ payoutId: row.id, projectId: row.project_id, operatorId }, 'payout claimed by an operator; the merchant can no longer cancel it');
    return { payout: payoutToProto(row) };
  }

  async completePayout(req: CompletePayoutRequest): Reply<typeof CompletePayoutResponseSchema> {
    const complete = requireValid(validateCompletePayout(req));
    const operatorId = await this.operator(req.operatorToken);
    // The chain is asked before the transaction (a slow node must not hold the payout's lock); the
    // address and amount it checks never change, and the stage is decided again under the lock.
    const found = await findPayoutById(this.deps.sql, complete.payoutId);
    if (!found) throw payoutNotFound();
    const hash = this.completionHash(found, complete.transactionHash);
    if (hash !== undefined && this.deps.chainCheck) {
      const onChain = await this.deps.chainCheck.check({ transactionHash: hash, coin: storedMethod(found.currency, found.network), address: found.address, amount: found.amount });
      if (!onChain.ok) throw serviceError(onChain.connectCode, onChain.code, onChain.reason, [{ field: 'transactionHash', message: onChain.reason }]);
    }
    const row = await eventTransaction(this.deps.sql, async (tx) => {
      const locked = await lockPayout(tx, complete.payoutId);
      if (!locked) throw payoutNotFound();
      const { payout } = locked;
      refuseIfSentByProcessor(payout);
      const transactionHash = this.completionHash(payout, complete.transactionHash);
      // Not claimed, or no longer claimed: the table's 409, whatever hash it carries.
      if (transactionHash === undefined || transactionHash !== hash) return applyTrigger(tx, payout, 'complete');
      // The treasury's transfer for another payout (or a sweep) paying the same address and amount
      // would complete this one too, and leave its own payout in flight for good.
      const treasury = await treasuryTransactionOf(tx, transactionHash);
      if (treasury !== undefined && treasury.payoutId !== payout.id) {
        throw errors.conflict('transaction_already_used', `this transaction is the treasury's ${TREASURY_TRANSFER_WORDS[treasury.kind] ?? treasury.kind}: it completes only what it was signed for`);
      }
      if (!(await recordPayoutTransaction(tx, transactionHash, payout.id))) {
        throw errors.conflict('transaction_already_used', 'this transaction already completed another payout: one transaction pays one payout');
      }
      return applyTrigger(tx, payout, 'complete', { transactionHash });
    });
    this.deps.metrics?.completed.inc({ currency: row.currency });
    this.deps.logger.info({ payoutId: row.id, projectId: row.project_id, transactionHash: row.transaction_hash, operatorId }, 'payout completed; hold debited');
    return { payout: payoutToProto(row) };
  }

  /**
   * The hash a completion of `payout` would record: undefined when the payout is not being sent (the
   * state decides first: a second completion is a 409 whatever hash it carries); a malformed hash
   * is a validation error.
   */
  private completionHash(payout: PayoutRow, raw: unknown): string | undefined {
    if (stageOf(payout) !== 'Sending') return undefined;
    const hash = checkTransactionHash(raw, storedMethod(payout.currency, payout.network));
    if (!hash.ok) throw invalidRequest([{ field: 'transactionHash', message: hash.reason }]);
    return hash.value;
  }

  async rejectPayout(req: RejectPayoutRequest): Reply<typeof RejectPayoutResponseSchema> {
    const reject = requireValid(validateRejectPayout(req));
    const operatorId = await this.operator(req.operatorToken);
    const row = await eventTransaction(this.deps.sql, async (tx) => {
      const locked = await lockPayout(tx, reject.payoutId);
      if (!locked) throw payoutNotFound();
      refuseIfSentByProcessor(locked.payout);
      return applyTrigger(tx, locked.payout, 'reject', { adminNote: reject.adminNote });
    });
    this.deps.metrics?.rejected.inc();
    this.deps.logger.info({ payoutId: row.id, projectId: row.project_id, operatorId }, 'payout rejected by an operator; hold released');
    return { payout: payoutToProto(row) };
  }
}

/** An operator's Complete or Reject of a payout the treasury's processor is sending: 409. */
function refuseIfSentByProcessor(payout: PayoutRow): void {
  if (isSentByProcessor(payout)) {
    throw errors.conflict(
      'payout_sent_by_processor',
      `the treasury processor is sending this payout (${payout.claimed_by}): the chain completes or rejects it, not an operator`,
    );
  }
}

/** Who claims a sandbox payout: the sandbox itself (no operator, nothing is sent). */
const SANDBOX_PROCESSOR = 'sandbox';

/** A random hash in the network's transaction-hash format, for sandbox payouts (nothing is sent). */
export function simulatedTransactionHash(currency: string, network: string): string {
  const hex = randomBytes(32).toString('hex');
  return isEvmChain(storedMethod(currency, network).chain) ? `0x${hex}` : hex;
}

function attemptsLeft(n: number): string {
  return n === 1 ? '1 attempt' : `${n} attempts`;
}
