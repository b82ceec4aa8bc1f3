import { previousKeksSetting, SecretBox, secretsKekSetting } from '@coinvoice/domain/secrets-at-rest';
import { createSsrfGuard, ssrfModeOf, webhookDestinationSettings, webhookUrlPolicyOf } from '@coinvoice/domain/ssrf';
import { setting, type ServiceDefinition, allowCallers, createRpcClient, PostgresRateLimitStore, rateLimitCleaner, rateLimitSetting } from '@coinvoice/runtime';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { previousSecretEraser } from './previous-secret-eraser';
import { OWASP_ARGON2ID_PARAMS, PasswordHasher } from './domain/passwords';
import type { WebhookUrlPolicy } from './domain/webhook-url-policy';
import { AuthHandlers } from './handlers';
import { SessionTokens } from './sessions';
import { ApiKeyStore } from './store/api-keys';
import { MerchantStore } from './store/merchants';
import { ProjectStore } from './store/projects';
import { reencryptSecrets } from './store/secrets';
import { SignUpStore } from './store/sign-ups';
import { SigningKeyStore } from './store/signing-keys';
import { authSchema } from './schema';

export const authSettings = {
  /** The same switch the notifier reads: in production, webhooks may not point at private networks. */
  ...webhookDestinationSettings,
  /** Key-encryption key of the webhook secrets and signing keys at rest (required in production). */
  SECRETS_KEK: secretsKekSetting,
  /** Older KEKs still accepted for reading while `rotate-kek` re-encrypts (comma-separated). */
  SECRETS_KEK_PREVIOUS: previousKeksSetting,
  /** gRPC URL of the notifier, which emails the email verification code. */
  NOTIFIER_URL: setting.url(['http:', 'https:'], { devDefault: 'http://127.0.0.1:50054' }),
  /** Login attempts per account (normalised email) and client IP, right or wrong, shared by every replica. */
  RATE_LIMIT_LOGIN_PER_ACCOUNT: rateLimitSetting('login-account', '10/15m'),
  /**
   * Password changes per merchant, right or wrong: the current password asked there is the login's
   * own, so a stolen session token must not try it faster than a login could (only changes wait).
   */
  RATE_LIMIT_PASSWORD_CHANGE_PER_ACCOUNT: rateLimitSetting('password-change', '10/15m'),
  /** Login attempts per client IP. */
  RATE_LIMIT_LOGIN_PER_IP: rateLimitSetting('login-ip', '50/15m'),
  /** Registrations per client IP. */
  RATE_LIMIT_REGISTER_PER_IP: rateLimitSetting('register-ip', '10/1h'),
  /** Email verification attempts and code resends per merchant; sign-up confirmations per email. */
  RATE_LIMIT_EMAIL_CODE_PER_ACCOUNT: rateLimitSetting('email-code', '10/1h'),
  /** Projects per merchant account (projects are never deleted); one more is 409 too_many_projects. */
  MAX_PROJECTS_PER_MERCHANT: setting.int({ default: 100, min: 1, max: 100_000 }),
  /**
   * API keys created per project (revoked or not): each new key starts a fresh RATE_LIMIT_API_PER_KEY
   * allowance, so revoke-and-create must not lift a project's API ceiling without end.
   */
  RATE_LIMIT_API_KEY_CREATE_PER_PROJECT: rateLimitSetting('api-key-create-project', '20/1h'),
  /** Unrevoked API keys per project; one more is 409 too_many_api_keys. */
  MAX_ACTIVE_API_KEYS_PER_PROJECT: setting.int({ default: 20, min: 1, max: 10_000 }),
  /** How long an email verification (or sign-up) code is valid. Default 24 h. */
  EMAIL_CODE_TTL_MS: setting.int({ default: 24 * 60 * 60_000, min: 60_000, max: 7 * 24 * 60 * 60_000 }),
  /** Lifetime of a session JWT; also how long a retired signing key stays in the JWKS. Default 12 h. */
  SESSION_TTL_SECONDS: setting.int({ default: 12 * 60 * 60, min: 60, max: 30 * 24 * 60 * 60 }),
  /** argon2id memory cost (KiB) of new password hashes. Default: the OWASP minimum, 19 MiB. */
  PASSWORD_HASH_MEMORY_KIB: setting.int({ default: OWASP_ARGON2ID_PARAMS.memoryKiB, min: 1024, max: 1024 * 1024 }),
};

export interface AuthServiceOptions {
  /**
   * Where webhooks may point beyond syntax. Default: the shared SSRF guard, which in production
   * refuses private, loopback, link-local and metadata destinations (the notifier checks again at
   * every delivery, against DNS rebinding).
   */
  webhookUrlPolicy?: WebhookUrlPolicy;
}

/** The auth service process: what it serves and the background work it runs. */
export function defineAuthService(options: AuthServiceOptions = {}): ServiceDefinition<typeof authSettings> {
  return {
    ...authSchema,
    rpcServices: [AuthService.typeName],
    callers: [
      allowCallers(AuthService, {
        registerMerchant: ['gateway'],
        confirmRegistration: ['gateway'],
        login: ['gateway'],
        getMerchant: ['gateway'],
        getJwks: ['gateway'],
        // No process rotates keys today; an operator tool would be added here.
        rotateSigningKey: [],
        createProject: ['gateway'],
        listProjects: ['gateway'],
        getProject: ['gateway'],
        updateProject: ['gateway'],
        rotateWebhookSecret: ['gateway'],
        endPreviousWebhookSecret: ['gateway'],
        createApiKey: ['gateway'],
        listApiKeys: ['gateway'],
        revokeApiKey: ['gateway'],
        verifyApiKey: ['gateway'],
        // Carries the webhook secret: only the services that need the project's context.
        getProjectContext: ['payout', 'notifier'],
        verifyEmail: ['gateway'],
        resendEmailVerification: ['gateway'],
        logout: ['gateway'],
        changePassword: ['gateway'],
        listSessionRevocations: ['gateway'],
        verifyOperatorToken: ['payout'],
      }),
    ],
    settings: authSettings,
    async build({ config, sql, logger, rpcTls }) {
      const box = new SecretBox(config.SECRETS_KEK, config.SECRETS_KEK_PREVIOUS);
      // Rows from before encryption (or under an older KEK) are sealed with the current KEK now.
      const resealed = await reencryptSecrets(sql, box);
      if (resealed.webhookSecrets + resealed.previousWebhookSecrets + resealed.signingKeys > 0) logger.info({ ...resealed, kekId: box.current.id }, 'secrets at rest re-encrypted');
      const sessions = new SessionTokens(new SigningKeyStore(sql, box), config.SESSION_TTL_SECONDS);
      await sessions.ensureSigningKey();
      const handlers = new AuthHandlers({
        sql,
        merchants: new MerchantStore(sql),
        signUps: new SignUpStore(sql),
        projects: new ProjectStore(sql, box),
        apiKeys: new ApiKeyStore(sql),
        sessions,
        passwords: new PasswordHasher({ ...OWASP_ARGON2ID_PARAMS, memoryKiB: config.PASSWORD_HASH_MEMORY_KIB }),
        notifier: createRpcClient(NotifierService, config.NOTIFIER_URL, { timeoutMs: 10_000, tls: rpcTls }),
        emailCodeTtlMs: config.EMAIL_CODE_TTL_MS,
        rateLimits: {
          store: new PostgresRateLimitStore(sql),
          loginPerAccount: config.RATE_LIMIT_LOGIN_PER_ACCOUNT,
          loginPerIp: config.RATE_LIMIT_LOGIN_PER_IP,
          passwordChangePerAccount: config.RATE_LIMIT_PASSWORD_CHANGE_PER_ACCOUNT,
          apiKeyCreatePerProject: config.RATE_LIMIT_API_KEY_CREATE_PER_PROJECT,
          registerPerIp: config.RATE_LIMIT_REGISTER_PER_IP,
          emailCodePerAccount: config.RATE_LIMIT_EMAIL_CODE_PER_ACCOUNT,
        },
        webhookUrlPolicy: options.webhookUrlPolicy ?? webhookUrlPolicyOf(createSsrfGuard({ mode: ssrfModeOf(config) })),
        limits: { projectsPerMerchant: config.MAX_PROJECTS_PER_MERCHANT, activeApiKeysPerProject: config.MAX_ACTIVE_API_KEYS_PER_PROJECT },
        logger,
      });
      return {
        routes(router) {
          router.service(AuthService, handlers);
        },
        workers: [rateLimitCleaner(sql, logger), previousSecretEraser({ sql, logger })],
      };
    },
  };
}

export const authService = defineAuthService();
