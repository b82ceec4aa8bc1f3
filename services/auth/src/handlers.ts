/**
 * The AuthService RPCs (auth.proto). Each handler validates its input with the domain rules
 * (violations name the public JSON fields), then reads or writes through the store; changes that
 * others must learn about write their event to the outbox in the same transaction.
 *
 * Error codes (ConnectError code / ErrorDetail.code):
 * - InvalidArgument / validation_failed (with field violations): bad input on any RPC.
 * - InvalidArgument / invalid_verification_code: ConfirmRegistration with a wrong code or password, an email
 *   with no pending sign-up or one that has an account (the same answer: nothing tells which
 *   emails exist); FailedPrecondition (409) / verification_code_expired when the code is
 *   too old or out of attempts.
 * - Unauthenticated / invalid_credentials: Login with an unknown email or a wrong password (the
 *   same answer, in comparable time).
 * - Unauthenticated / invalid_api_key: VerifyApiKey with a malformed (no database lookup),
 *   unknown or revoked key.
 * - NotFound / not_found: an unknown or malformed id, or a project (or key) of another merchant.
 *
 * Nothing secret is ever logged: passwords, plain API keys, tokens and webhook secrets are never
 * passed to the logger, only ids.
 */
import { isWellFormedOneTimeCode, issueOneTimeCode, oneTimeCodeMatches } from '@coinvoice/domain/credentials/one-time-code';
import { Code, clientAddressKey, errors, invalidRequest, serviceError, enforceRateLimit, enqueueEvent, eventTransaction, type EventTransaction, type RateLimitPolicy, type RateLimitStore, type Logger, type Sql, type TransactionSql } from '@coinvoice/runtime';
import type { Client, ServiceImpl } from '@connectrpc/connect';
import { EmailCodePurpose, type NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import type {
  AuthService,
  ChangePasswordRequest,
  ConfirmRegistrationRequest,
  CreateApiKeyRequest,
  CreateProjectRequest,
  GetMerchantRequest,
  GetProjectContextRequest,
  GetProjectRequest,
  ListApiKeysRequest,
  ListProjectsRequest,
  LoginRequest,
  LogoutRequest,
  RegisterMerchantRequest,
  ResendEmailVerificationRequest,
  VerifyEmailRequest,
  VerifyOperatorTokenRequest,
  RevokeApiKeyRequest,
  RotateWebhookSecretRequest,
  EndPreviousWebhookSecretRequest,
  UpdateProjectRequest,
  VerifyApiKeyRequest,
} from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { PasswordHasher } from './domain/passwords';
import {
  validateApiKeyCreation,
  validateLogin,
  validateNewProject,
  validatePasswordChange,
  validateProjectUpdate,
  validateRegistration,
  validateRegistrationConfirmation,
  type Validated,
} from './domain/validation';
import { generateWebhookSecret, PREVIOUS_WEBHOOK_SECRET_DEFAULT_MINUTES, PREVIOUS_WEBHOOK_SECRET_MAX_MINUTES } from './domain/webhook-secrets';
import type { WebhookUrlPolicy } from './domain/webhook-url-policy';
import { hashApiKey, issueApiKey, parseApiKey } from '@coinvoice/domain/credentials/api-keys';
import type { SessionSubject } from '@coinvoice/domain/credentials/jwt';
import { apiKeyRevokedEvent, projectUpdatedEvent, sessionsRevokedEvent } from './events/auth-events';
import {
  apiKeyMessage,
  canonicalPercent,
  environmentFromProto,
  environmentToProto,
  jwkMessage,
  merchantMessage,
  projectMessage,
} from './messages';
import type { SessionTokens } from './sessions';
import type { ApiKeyStore } from './store/api-keys';
import type { MerchantStore } from './store/merchants';
import type { ProjectStore } from './store/projects';
import type { MerchantRow } from './store/rows';
import type { SignUpStore } from './store/sign-ups';

/** Wrong email codes allowed per issued code (a new code resets them). */
export const EMAIL_CODE_MAX_ATTEMPTS = 5;

/** A key's last_used_at is written at most once per this many seconds. */
export const DEFAULT_LAST_USED_INTERVAL_SECONDS = 60;

export interface AuthHandlerDeps {
  sql: Sql;
  merchants: MerchantStore;
  signUps: SignUpStore;
  projects: ProjectStore;
  apiKeys: ApiKeyStore;
  sessions: SessionTokens;
  passwords: PasswordHasher;
  /** Emails the verification and sign-up codes (SendEmailVerificationEmail) and sign-up attempts on a registered email. */
  notifier: Pick<Client<typeof NotifierService>, 'sendEmailVerificationEmail' | 'sendSignUpAttemptEmail'>;
  /** How long an email verification (or sign-up) code is valid. */
  emailCodeTtlMs: number;
  /** Limits that guard passwords and codes (docs/architecture.md#rate-limits), counted in Postgres across replicas. */
  rateLimits: {
    store: RateLimitStore;
    loginPerAccount: RateLimitPolicy;
    loginPerIp: RateLimitPolicy;
    passwordChangePerAccount: RateLimitPolicy;
    apiKeyCreatePerProject: RateLimitPolicy;
    registerPerIp: RateLimitPolicy;
    emailCodePerAccount: RateLimitPolicy;
  };
  webhookUrlPolicy: WebhookUrlPolicy;
  /**
   * What one account may hold: every project and active key multiplies the per-project and
   * per-key limits (API calls, event streams, test webhooks, payout requests).
   */
  limits: { projectsPerMerchant: number; activeApiKeysPerProject: number };
  logger: Logger;
  lastUsedIntervalSeconds?: number;
  now?: () => Date;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export class AuthHandlers implements ServiceImpl<typeof AuthService> {
  private readonly lastUsedIntervalMs: number;
  private readonly now: () => Date;

  constructor(private readonly deps: AuthHandlerDeps) {
    this.lastUsedIntervalMs = (deps.lastUsedIntervalSeconds ?? DEFAULT_LAST_USED_INTERVAL_SECONDS) * 1000;
    this.now = deps.now ?? (() => new Date());
  }

  // -------------------------------------------------------------------------------------------
  // Merchants and sessions

  /**
   * Starts a sign-up (issue 27). A new email and a registered one get the same answer after the
   * same work (the argon2id hash, one upsert of the pending sign-up, one email): for a new email
   * the email carries the code, for a registered one it tells the owner someone tried, and the
   * pending row's code is never sent, so confirming it fails like any wrong code.
   */
  async registerMerchant(req: RegisterMerchantRequest) {
    const input = validated(validateRegistration({ email: req.email, password: req.password, name: req.name }));
    // Before the 19 MiB hash: a flood costs one upsert per request.
    await this.limit(this.deps.rateLimits.registerPerIp, clientAddressKey(req.clientIp));
    const passwordHash = await this.deps.passwords.hash(input.password);
    const issued = issueOneTimeCode(input.email);
    const pending = await this.deps.signUps.start({
      email: input.email,
      name: input.name,
      passwordHash,
      codeHash: issued.hash,
      codeSalt: issued.salt,
      ttlMs: this.deps.emailCodeTtlMs,
      attempts: EMAIL_CODE_MAX_ATTEMPTS,
    });
    try {
      if (pending.accountExists) {
        await this.deps.notifier.sendSignUpAttemptEmail({ email: input.email });
      } else {
        await this.deps.notifier.sendEmailVerificationEmail({
          email: input.email,
          code: issued.code,
          expiresAt: timestampFromDate(pending.codeExpiresAt),
          purpose: EmailCodePurpose.SIGN_UP,
        });
      }
    } catch (err) {
      // Either email failing answers the same: the sign-up cannot go on without it.
      this.deps.logger.warn({ error: errorMessage(err) }, 'could not email a sign-up; the merchant can register again');
      throw serviceError(Code.Unavailable, 'service_unavailable', 'the email could not be sent; try again shortly');
    }
    // For operators (the caller's answer is the same either way); never the email itself.
    this.deps.logger.info({ accountExists: pending.accountExists }, 'sign-up started');
    return { email: input.email, codeExpiresAt: timestampFromDate(pending.codeExpiresAt) };
  }

  /**
   * Creates the account of a pending sign-up with the emailed code, its email verified, and signs
   * it in. The password must be the pending one: whoever registers an email last sets it, so the
   * code alone (which reaches the address's owner) must not create an account with a stranger's
   * password (pre-account hijacking); the owner then simply registers again.
   */
  async confirmRegistration(req: ConfirmRegistrationRequest) {
    const input = validated(validateRegistrationConfirmation({ email: req.email, code: req.code, password: req.password }));
    await this.limit(this.deps.rateLimits.emailCodePerAccount, `sign-up ${input.email}`);
    type Outcome = { kind: 'created'; merchant: MerchantRow } | { kind: 'wrong' } | { kind: 'expired' };
    const outcome = await this.deps.sql.begin(async (tx): Promise<Outcome> => {
      // Locked: a second confirmation of the same sign-up waits, then finds it gone.
      const pending = await this.deps.signUps.lock(tx, input.email);
      if (!pending) return { kind: 'wrong' };
      if (!pending.code_hash || !pending.code_salt || pending.code_expires_at.getTime() <= pending.now.getTime()) return { kind: 'expired' };
      // argon2id only with the right code (the code is the secret; guessing costs nothing more).
      if (
        !oneTimeCodeMatches(input.email, input.code, pending.code_salt, pending.code_hash) ||
        !(await this.deps.passwords.verify(input.password, pending.password_hash))
      ) {
        await this.deps.signUps.useAttempt(tx, input.email);
        return { kind: 'wrong' };
      }
      const merchant = await this.deps.merchants.create(
        { email: input.email, name: pending.name, passwordHash: pending.password_hash, emailVerified: true },
        tx,
      );
      if (!merchant) {
        // The email has an account (its pending row's code was never sent, or the account came
        // meanwhile): the same answer as a wrong code, and the attempt counts.
        await this.deps.signUps.useAttempt(tx, input.email);
        return { kind: 'wrong' };
      }
      await this.deps.signUps.remove(tx, input.email);
      return { kind: 'created', merchant };
    });
    switch (outcome.kind) {
      case 'created': {
        const session = await this.deps.sessions.issue(subjectOf(outcome.merchant));
        this.deps.logger.info({ merchantId: outcome.merchant.id }, 'merchant registered');
        return { merchant: merchantMessage(outcome.merchant), token: session.token, expiresAt: timestampFromDate(session.expiresAt) };
      }
      case 'wrong':
        throw wrongSignUpConfirmation();
      case 'expired':
        throw errors.conflict('verification_code_expired', 'no valid sign-up code is pending: register again for a new one');
    }
  }

  async login(req: LoginRequest) {
    const input = validated(validateLogin({ email: req.email, password: req.password }));
    // Every attempt counts, right or wrong. The account's limit is counted per client IP too: a
    // stranger's wrong passwords exhaust only the stranger's own (account, IP) allowance and never
    // lock the owner out from elsewhere (issue 27); the per-IP limit bounds one client across accounts.
    await this.limit(this.deps.rateLimits.loginPerIp, clientAddressKey(req.clientIp));
    await this.limit(this.deps.rateLimits.loginPerAccount, `${input.email} ${clientAddressKey(req.clientIp)}`);
    const merchant = await this.deps.merchants.findCredentialsByEmail(input.email);
    // An unknown email spends the same argon2id work as a wrong password and gets the same answer.
    const matches = merchant
      ? await this.deps.passwords.verify(input.password, merchant.password_hash)
      : await this.deps.passwords.verifyDummy(input.password);
    if (!merchant || !matches) {
      // For operators (brute-force attempts show up by merchant id); the caller learns neither.
      if (merchant) this.deps.logger.info({ merchantId: merchant.id }, 'login refused: wrong password');
      else this.deps.logger.info('login refused: unknown email');
      throw errors.unauthenticated('invalid_credentials', 'the email or password is wrong');
    }
    if (this.deps.passwords.needsRehash(merchant.password_hash)) {
      await this.rehash(merchant.id, merchant.password_hash, input.password);
    }
    const session = await this.deps.sessions.issue(subjectOf(merchant));
    this.deps.logger.info({ merchantId: merchant.id }, 'merchant logged in');
    return { token: session.token, expiresAt: timestampFromDate(session.expiresAt) };
  }

  async getMerchant(req: GetMerchantRequest) {
    const merchant = isUuid(req.merchantId) ? await this.deps.merchants.findById(req.merchantId) : undefined;
    if (!merchant) throw errors.notFound('merchant');
    return { merchant: merchantMessage(merchant) };
  }

  async verifyEmail(req: VerifyEmailRequest) {
    const merchantId = requireId(req.merchantId, 'merchant');
    if (!isWellFormedOneTimeCode(req.code)) throw errors.validation([{ field: 'code', message: 'must be 6 digits' }]);
    await this.limit(this.deps.rateLimits.emailCodePerAccount, merchantId);
    type Outcome = { kind: 'verified'; merchant: MerchantRow } | { kind: 'wrong'; left: number } | { kind: 'expired' } | { kind: 'none' };
    const outcome = await this.deps.sql.begin(async (tx): Promise<Outcome> => {
      const row = await this.deps.merchants.lockEmailCode(tx, merchantId);
      if (!row) throw errors.notFound('merchant');
      if (row.email_verified_at !== null) {
        const merchant = await this.deps.merchants.findById(merchantId, tx);
        return merchant ? { kind: 'verified', merchant } : { kind: 'none' };
      }
      if (!row.email_code_hash || !row.email_code_salt || !row.email_code_expires_at) return { kind: 'none' };
      if (row.email_code_expires_at.getTime() <= row.now.getTime()) return { kind: 'expired' };
      if (oneTimeCodeMatches(merchantId, req.code, row.email_code_salt, row.email_code_hash)) {
        const merchant = await this.deps.merchants.markEmailVerified(tx, merchantId);
        return merchant ? { kind: 'verified', merchant } : { kind: 'none' };
      }
      return { kind: 'wrong', left: await this.deps.merchants.useEmailCodeAttempt(tx, merchantId) };
    });
    switch (outcome.kind) {
      case 'verified':
        this.deps.logger.info({ merchantId }, 'merchant email verified');
        return { merchant: merchantMessage(outcome.merchant) };
      case 'wrong':
        throw invalidVerificationCode(outcome.left > 0 ? `is wrong; ${outcome.left} attempt(s) left` : 'is wrong; no attempts left, ask for a new code');
      case 'expired':
      case 'none':
        throw errors.conflict('verification_code_expired', 'no valid verification code is pending: ask for a new one');
    }
  }

  async resendEmailVerification(req: ResendEmailVerificationRequest) {
    const merchant = await this.deps.merchants.findById(requireId(req.merchantId, 'merchant'));
    if (!merchant) throw errors.notFound('merchant');
    if (merchant.email_verified_at !== null) throw errors.conflict('email_already_verified', 'the email address is already verified');
    await this.limit(this.deps.rateLimits.emailCodePerAccount, merchant.id);
    try {
      await this.sendEmailCode(merchant);
    } catch (err) {
      this.deps.logger.warn({ merchantId: merchant.id, error: errorMessage(err) }, 'could not email the verification code');
      throw serviceError(Code.Unavailable, 'service_unavailable', 'the email could not be sent; try again shortly');
    }
    return {};
  }

  async logout(req: LogoutRequest) {
    const merchantId = requireId(req.merchantId, 'merchant');
    const revoked = await eventTransaction(this.deps.sql, (tx) => revokeSessions(tx, this.deps.merchants, merchantId));
    if (revoked === undefined) throw errors.notFound('merchant');
    this.deps.logger.info({ merchantId }, 'merchant logged out: every session revoked');
    return {};
  }

  async changePassword(req: ChangePasswordRequest) {
    const merchantId = requireId(req.merchantId, 'merchant');
    const input = validated(validatePasswordChange({ currentPassword: req.currentPassword, newPassword: req.newPassword }));
    // Every attempt counts, right or wrong, as a login's does: this route checks the same password.
    await this.limit(this.deps.rateLimits.passwordChangePerAccount, merchantId);
    const merchant = await this.deps.merchants.findCredentialsById(merchantId);
    if (!merchant) throw errors.notFound('merchant');
    if (!(await this.deps.passwords.verify(input.currentPassword, merchant.password_hash))) {
      throw serviceError(Code.Unauthenticated, 'invalid_credentials', 'the current password is wrong', [
        { field: 'currentPassword', message: 'is wrong' },
      ]);
    }
    const newHash = await this.deps.passwords.hash(input.newPassword);
    const epoch = await eventTransaction(this.deps.sql, async (tx) => {
      const replaced = await this.deps.merchants.replacePasswordHash(merchantId, merchant.password_hash, newHash, tx);
      if (!replaced) throw errors.conflict('conflict', 'the password changed meanwhile; try again');
      return revokeSessions(tx, this.deps.merchants, merchantId);
    });
    if (epoch === undefined) throw errors.notFound('merchant');
    const session = await this.deps.sessions.issue(subjectOf({ ...merchant, session_epoch: epoch }));
    this.deps.logger.info({ merchantId }, 'password changed: every older session revoked');
    return { token: session.token, expiresAt: timestampFromDate(session.expiresAt) };
  }

  async listSessionRevocations() {
    const rows = await this.deps.merchants.listSessionRevocations(this.deps.sessions.retentionSeconds);
    return { revocations: rows.map((row) => ({ merchantId: row.id, minSessionEpoch: row.session_epoch })) };
  }

  async verifyOperatorToken(req: VerifyOperatorTokenRequest) {
    const result = await this.deps.sessions.verify(req.token);
    if (!result.valid) throw errors.unauthenticated('invalid_token', 'the operator session token is invalid or expired');
    const merchant = await this.deps.merchants.findById(result.claims.sub);
    // The token must be current (not revoked) and its merchant an operator now, not only when signed.
    if (!merchant || merchant.session_epoch > result.claims.sv) {
      throw errors.unauthenticated('invalid_token', 'the operator session token was revoked');
    }
    if (!merchant.is_operator) throw errors.forbidden('forbidden', 'this operation is for operators');
    return { merchantId: merchant.id, email: merchant.email };
  }

  async getJwks() {
    const keys = await this.deps.sessions.publicKeys();
    return { keys: keys.map(jwkMessage) };
  }

  async rotateSigningKey() {
    const key = await this.deps.sessions.rotate();
    this.deps.logger.info({ kid: key.kid }, 'signing key rotated');
    return { key: jwkMessage(key) };
  }

  // -------------------------------------------------------------------------------------------
  // Projects

  async createProject(req: CreateProjectRequest) {
    const merchantId = requireId(req.merchantId, 'merchant');
    const input = validated(
      validateNewProject({
        name: req.name,
        environment: environmentFromProto(req.environment),
        webhookUrl: req.webhookUrl,
        paymentTolerancePercent: req.paymentTolerancePercent,
      }),
    );
    if (input.webhookUrl !== undefined) await this.checkWebhookDestination(input.webhookUrl);
    const webhookSecret = generateWebhookSecret();
    const project = await this.deps.projects.create({
      merchantId,
      name: input.name,
      environment: input.environment,
      webhookUrl: input.webhookUrl ?? null,
      webhookSecret,
      paymentTolerancePercent: input.paymentTolerancePercent ?? '0',
    }, this.deps.limits.projectsPerMerchant);
    if (!project) throw errors.notFound('merchant');
    if (project === 'limit_reached') {
      throw errors.conflict('too_many_projects', `an account has at most ${this.deps.limits.projectsPerMerchant} projects`);
    }
    this.deps.logger.info({ merchantId, projectId: project.id, environment: project.environment }, 'project created');
    return { project: projectMessage(project), webhookSecret };
  }

  async listProjects(req: ListProjectsRequest) {
    if (!isUuid(req.merchantId)) return { projects: [] };
    const projects = await this.deps.projects.listByMerchant(req.merchantId);
    return { projects: projects.map(projectMessage) };
  }

  async getProject(req: GetProjectRequest) {
    const project = await this.ownedProject(req.merchantId, req.projectId);
    return { project: projectMessage(project) };
  }

  async updateProject(req: UpdateProjectRequest) {
    const merchantId = requireId(req.merchantId, 'project');
    const projectId = requireId(req.projectId, 'project');
    const changes = validated(
      validateProjectUpdate({
        name: req.name,
        webhookUrl: req.webhookUrl,
        invoiceLifetimeMinutes: req.invoiceLifetimeMinutes,
        paymentTolerancePercent: req.paymentTolerancePercent,
      }),
    );
    if (typeof changes.webhookUrl === 'string') await this.checkWebhookDestination(changes.webhookUrl);
    const changesSomething = Object.keys(changes).length > 0;
    const project = await eventTransaction(this.deps.sql, async (tx) => {
      const updated = await this.deps.projects.update(tx, merchantId, projectId, changes);
      if (updated && changesSomething) {
        await enqueueEvent(tx, projectUpdatedEvent(updated, { webhookSecretRotated: false }));
      }
      return updated;
    });
    if (!project) throw errors.notFound('project');
    if (changesSomething) this.deps.logger.info({ merchantId, projectId, fields: Object.keys(changes) }, 'project updated');
    return { project: projectMessage(project) };
  }

  async rotateWebhookSecret(req: RotateWebhookSecretRequest) {
    const merchantId = requireId(req.merchantId, 'project');
    const projectId = requireId(req.projectId, 'project');
    const overlapMinutes = req.previousSecretExpiresInMinutes ?? PREVIOUS_WEBHOOK_SECRET_DEFAULT_MINUTES;
    if (!Number.isInteger(overlapMinutes) || overlapMinutes < 0 || overlapMinutes > PREVIOUS_WEBHOOK_SECRET_MAX_MINUTES) {
      throw invalidRequest([{ field: 'previousSecretExpiresInMinutes', message: `must be a whole number of minutes from 0 to ${PREVIOUS_WEBHOOK_SECRET_MAX_MINUTES}` }]);
    }
    const webhookSecret = generateWebhookSecret();
    const rotated = await eventTransaction(this.deps.sql, async (tx) => {
      const result = await this.deps.projects.replaceWebhookSecret(tx, merchantId, projectId, webhookSecret, overlapMinutes * 60_000);
      if (result) await enqueueEvent(tx, projectUpdatedEvent(result.row, { webhookSecretRotated: true }));
      return result;
    });
    if (!rotated) throw errors.notFound('project');
    const { previousUntil } = rotated;
    this.deps.logger.info({ merchantId, projectId, previousSecretExpiresAt: previousUntil }, 'webhook secret rotated');
    return { webhookSecret, ...(previousUntil === null ? {} : { previousSecretExpiresAt: timestampFromDate(previousUntil) }) };
  }

  async endPreviousWebhookSecret(req: EndPreviousWebhookSecretRequest) {
    const merchantId = requireId(req.merchantId, 'project');
    const projectId = requireId(req.projectId, 'project');
    const result = await eventTransaction(this.deps.sql, async (tx) => {
      const ended = await this.deps.projects.endPreviousWebhookSecrets(tx, merchantId, projectId);
      // The notifiers forget the project's context: the next attempt is signed with the current secret alone.
      if (ended && ended.ended > 0) await enqueueEvent(tx, projectUpdatedEvent(ended.row, { webhookSecretRotated: true }));
      return ended;
    });
    if (!result) throw errors.notFound('project');
    if (result.ended > 0) this.deps.logger.info({ merchantId, projectId, ended: result.ended }, 'replaced webhook secrets stopped');
    return { project: projectMessage(result.row) };
  }

  // -------------------------------------------------------------------------------------------
  // API keys

  async createApiKey(req: CreateApiKeyRequest) {
    const project = await this.ownedProject(req.merchantId, req.projectId);
    const input = validated(validateApiKeyCreation({ name: req.name }));
    if (project.environment === 'live') {
      const merchant = await this.deps.merchants.findById(project.merchant_id);
      if (merchant?.email_verified_at == null) {
        throw errors.forbidden('email_not_verified', 'verify your email address before creating live API keys');
      }
    }
    await this.limit(this.deps.rateLimits.apiKeyCreatePerProject, project.id);
    const issued = issueApiKey(project.environment);
    const apiKey = await this.deps.apiKeys.create({
      projectId: project.id,
      name: input.name,
      keyHash: issued.hash,
      displayPrefix: issued.displayPrefix,
    }, this.deps.limits.activeApiKeysPerProject);
    if (apiKey === 'limit_reached') {
      throw errors.conflict('too_many_api_keys', `a project has at most ${this.deps.limits.activeApiKeysPerProject} active API keys: revoke one first`);
    }
    this.deps.logger.info({ projectId: project.id, keyId: apiKey.id }, 'api key created');
    return { apiKey: apiKeyMessage(apiKey), key: issued.key };
  }

  async listApiKeys(req: ListApiKeysRequest) {
    const project = await this.ownedProject(req.merchantId, req.projectId);
    const keys = await this.deps.apiKeys.listByProject(project.id);
    return { apiKeys: keys.map(apiKeyMessage) };
  }

  async revokeApiKey(req: RevokeApiKeyRequest) {
    const merchantId = requireId(req.merchantId, 'api key');
    const projectId = requireId(req.projectId, 'api key');
    const keyId = requireId(req.keyId, 'api key');
    const revoked = await eventTransaction(this.deps.sql, async (tx) => {
      const result = await this.deps.apiKeys.revoke(tx, merchantId, projectId, keyId);
      if (result?.revokedNow && result.key.revoked_at) {
        await enqueueEvent(
          tx,
          apiKeyRevokedEvent({ keyId, projectId, keyHash: result.keyHash, revokedAt: result.key.revoked_at }),
        );
      }
      return result;
    });
    if (!revoked) throw errors.notFound('api key');
    if (revoked.revokedNow) this.deps.logger.info({ projectId, keyId }, 'api key revoked');
    return { apiKey: apiKeyMessage(revoked.key) };
  }

  async verifyApiKey(req: VerifyApiKeyRequest) {
    // Shape and checksum first: a mistyped or made-up key never reaches the database.
    const parsed = parseApiKey(req.key);
    if (!parsed.wellFormed) throw invalidApiKey();
    const found = await this.deps.apiKeys.findForVerification(hashApiKey(req.key));
    if (!found || found.revoked_at !== null || found.environment !== parsed.environment) throw invalidApiKey();
    if (!found.last_used_at || this.now().getTime() - found.last_used_at.getTime() >= this.lastUsedIntervalMs) {
      // Bookkeeping only: a failed write must not refuse a valid key.
      await this.deps.apiKeys
        .touchLastUsed(found.key_id, this.lastUsedIntervalMs / 1000)
        .catch((err: unknown) => this.deps.logger.warn({ err, keyId: found.key_id }, 'could not record api key use'));
    }
    return {
      keyId: found.key_id,
      projectId: found.project_id,
      projectName: found.project_name,
      environment: environmentToProto(found.environment),
      merchantId: found.merchant_id,
      invoiceLifetimeMinutes: found.invoice_lifetime_minutes,
      paymentTolerancePercent: canonicalPercent(found.payment_tolerance_percent),
    };
  }

  // -------------------------------------------------------------------------------------------
  // Internal

  async getProjectContext(req: GetProjectContextRequest) {
    const context = isUuid(req.projectId) ? await this.deps.projects.findContext(req.projectId) : undefined;
    if (!context) throw errors.notFound('project');
    return {
      projectId: context.id,
      projectName: context.name,
      environment: environmentToProto(context.environment),
      merchantId: context.merchant_id,
      merchantEmail: context.merchant_email,
      ...(context.webhook_url === null ? {} : { webhookUrl: context.webhook_url }),
      webhookSecret: context.webhook_secret,
      previousWebhookSecrets: context.previous_webhook_secrets.map((previous) => ({ secret: previous.secret, expiresAt: timestampFromDate(previous.expires_at) })),
      invoiceLifetimeMinutes: context.invoice_lifetime_minutes,
      merchantEmailVerified: context.merchant_email_verified,
    };
  }

  // -------------------------------------------------------------------------------------------

  private async limit(policy: RateLimitPolicy, key: string): Promise<void> {
    try {
      await enforceRateLimit(this.deps.rateLimits.store, policy, key);
    } catch (err) {
      this.deps.logger.info({ policy: policy.name }, 'rate limit reached');
      throw err;
    }
  }

  /** A new email verification code (replacing any earlier one), emailed by the notifier; stored only hashed. */
  private async sendEmailCode(merchant: MerchantRow): Promise<void> {
    const issued = issueOneTimeCode(merchant.id);
    await this.deps.merchants.setEmailCode(merchant.id, {
      hash: issued.hash,
      salt: issued.salt,
      ttlMs: this.deps.emailCodeTtlMs,
      attempts: EMAIL_CODE_MAX_ATTEMPTS,
    });
    await this.deps.notifier.sendEmailVerificationEmail({
      email: merchant.email,
      code: issued.code,
      expiresAt: timestampFromDate(new Date(this.now().getTime() + this.deps.emailCodeTtlMs)),
      purpose: EmailCodePurpose.ADDRESS,
    });
  }

  /** The merchant's project, or not_found (unknown, malformed, or someone else's). */
  private async ownedProject(merchantId: string, projectId: string) {
    const project =
      isUuid(merchantId) && isUuid(projectId) ? await this.deps.projects.findOwned(merchantId, projectId) : undefined;
    if (!project) throw errors.notFound('project');
    return project;
  }

  private async checkWebhookDestination(url: string): Promise<void> {
    const refusal = await this.deps.webhookUrlPolicy.refusal(url);
    if (refusal !== undefined) throw errors.validation([{ field: 'webhookUrl', message: refusal }]);
  }

  /** Re-hashes with the current parameters after a successful login; failure only costs a retry next time. */
  private async rehash(merchantId: string, previousHash: string, password: string): Promise<void> {
    try {
      await this.deps.merchants.replacePasswordHash(merchantId, previousHash, await this.deps.passwords.hash(password));
    } catch (err) {
      // Only the message: the error object of a failed write could carry the new hash.
      this.deps.logger.warn({ merchantId, error: err instanceof Error ? err.message : String(err) }, 'could not upgrade a password hash');
    }
  }
}


function subjectOf(merchant: MerchantRow): SessionSubject {
  return { merchantId: merchant.id, email: merchant.email, admin: merchant.is_operator, sessionEpoch: merchant.session_epoch };
}

/**
 * Raises the merchant's session epoch and announces it (gateways drop older tokens at once); the
 * new epoch, or undefined for an unknown merchant. Also used by the operator commands.
 */
export async function revokeSessions(tx: EventTransaction, merchants: MerchantStore, merchantId: string): Promise<number | undefined> {
  const epoch = await merchants.revokeSessions(tx, merchantId);
  if (epoch !== undefined) await enqueueEvent(tx, sessionsRevokedEvent({ merchantId, minSessionEpoch: epoch, revokedAt: new Date() }));
  return epoch;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function validated<T>(result: Validated<T>): T {
  if (!result.ok) throw errors.validation(result.violations);
  return result.value;
}

function isUuid(id: string): boolean {
  return UUID.test(id);
}

/** The id when it is a UUID; otherwise not_found, as for any id that names nothing. */
function requireId(id: string, what: string): string {
  if (!isUuid(id)) throw errors.notFound(what);
  return id;
}

/**
 * A sign-up confirmation refused: a wrong code, a password other than the one registered with, or an
 * email with no pending sign-up (none, or its code already used: the account exists) — one answer,
 * so nothing tells which emails have an account; it names both things the caller may have mistyped.
 */
function wrongSignUpConfirmation() {
  return serviceError(Code.InvalidArgument, 'invalid_verification_code', 'the verification code or the password is wrong', [
    { field: 'code', message: 'is wrong, or the password is not the one registered with' },
  ]);
}

function invalidVerificationCode(reason: string) {
  return serviceError(Code.InvalidArgument, 'invalid_verification_code', 'the verification code is wrong', [{ field: 'code', message: reason }]);
}

function invalidApiKey() {
  return errors.unauthenticated('invalid_api_key', 'the API key is invalid or revoked');
}
