import {
  createSsrfGuard,
  migrationsDirOf,
  setting,
  ssrfModeOf,
  webhookDestinationSettings,
  webhookUrlPolicyOf,
  type ServiceDefinition,
  type Setting,
} from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import {
  checkEmail,
  OWASP_ARGON2ID_PARAMS,
  PasswordHasher,
  type WebhookUrlPolicy,
} from './domain';
import { AuthHandlers } from './handlers';
import { SessionTokens } from './sessions';
import { ApiKeyStore, MerchantStore, ProjectStore, SigningKeyStore } from './store';

/** ADMIN_EMAILS: comma-separated emails, compared case-insensitively; every entry must be an email. */
function adminEmailsSetting(): Setting<ReadonlySet<string>> {
  return {
    expected: 'a comma-separated list of email addresses (may be empty)',
    default: '',
    parse(raw) {
      const emails = new Set<string>();
      for (const entry of raw.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
        const email = checkEmail(entry);
        if (!email.ok) return undefined;
        emails.add(email.value);
      }
      return emails;
    },
  };
}

export const authSettings = {
  /** The same switch the notifier reads: in production, webhooks may not point at private networks. */
  ...webhookDestinationSettings,
  /** Merchants whose email is listed are operators: `admin: true` in their token, is_admin in GetMerchant. */
  ADMIN_EMAILS: adminEmailsSetting(),
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
    name: 'auth',
    rpcServices: [AuthService.typeName],
    settings: authSettings,
    migrationsDir: migrationsDirOf(__dirname),
    async build({ config, sql, logger }) {
      const sessions = new SessionTokens(new SigningKeyStore(sql), config.SESSION_TTL_SECONDS);
      await sessions.ensureSigningKey();
      const handlers = new AuthHandlers({
        sql,
        merchants: new MerchantStore(sql),
        projects: new ProjectStore(sql),
        apiKeys: new ApiKeyStore(sql),
        sessions,
        passwords: new PasswordHasher({ ...OWASP_ARGON2ID_PARAMS, memoryKiB: config.PASSWORD_HASH_MEMORY_KIB }),
        adminEmails: config.ADMIN_EMAILS,
        webhookUrlPolicy: options.webhookUrlPolicy ?? webhookUrlPolicyOf(createSsrfGuard({ mode: ssrfModeOf(config) })),
        logger,
      });
      return {
        routes(router) {
          router.service(AuthService, handlers);
        },
      };
    },
  };
}

export const authService = defineAuthService();
