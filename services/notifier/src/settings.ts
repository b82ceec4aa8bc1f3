/**
 * The notifier's own settings (environment variables, validated at start: a bad value stops the
 * process with one line naming the variable and what was expected).
 */
import { webhookDestinationSettings } from '@coinvoice/domain/ssrf';
import { rateLimitSetting, redactUrlPassword, setting, type Setting } from '@coinvoice/runtime';
import { DEFAULT_RETRY_SCHEDULE, parseRetrySchedule, type RetrySchedule } from './domain/retry-schedule';

const retryScheduleSetting: Setting<RetrySchedule> = {
  expected: `comma-separated waits between attempts like "${DEFAULT_RETRY_SCHEDULE}" (units ms, s, m, h, d; never decreasing)`,
  default: DEFAULT_RETRY_SCHEDULE,
  parse: (raw) => {
    try {
      return parseRetrySchedule(raw);
    } catch {
      return undefined;
    }
  },
};

/**
 * SMTP_URL: smtp://[user:pass@]host:port (STARTTLS when offered) or smtps://… (TLS from the start).
 * Required in production. Empty in development: emails are written as .eml files to MAILBOX_DIR.
 */
const smtpUrlSetting: Setting<string> = {
  expected: 'a URL starting with smtp:// or smtps:// (empty in development: emails go to MAILBOX_DIR as files)',
  devDefault: '',
  shown: redactUrlPassword,
  parse: (raw) => {
    if (raw === '') return '';
    try {
      const url = new URL(raw);
      return (url.protocol === 'smtp:' || url.protocol === 'smtps:') && url.hostname !== '' ? raw : undefined;
    } catch {
      return undefined;
    }
  },
};

/**
 * WEBHOOK_MAX_PER_ENDPOINT counted the URL saved on each delivery while attempts went to the
 * project's URL of the moment (issue 27): replaced by the per-project and per-host limits. A
 * deployment that still sets it stops at start rather than lose its limit silently.
 */
const retiredPerEndpointSetting: Setting<null> = {
  expected: 'unset: it was replaced by WEBHOOK_MAX_PER_PROJECT and WEBHOOK_MAX_PER_HOST',
  default: '',
  parse: (raw) => (raw === '' ? null : undefined),
};

export const notifierSettings = {
  /** gRPC URL of the auth service (GetProjectContext: webhook URL and secret, merchant email). */
  AUTH_URL: setting.url(['http:', 'https:'], { devDefault: 'http://127.0.0.1:50051' }),
  /**
   * The longest a project's webhook URL and secret are used from the cache without asking auth
   * again; auth's project updates drop them at once (docs/webhook-delivery.md#project-context).
   */
  PROJECT_CONTEXT_TTL_MS: setting.int({ default: 60_000, min: 0, max: 3_600_000 }),
  /** Waits between delivery attempts; the delivery fails after the last one. */
  WEBHOOK_RETRY_SCHEDULE: retryScheduleSetting,
  /** One attempt's limit: no complete response within it is a failed attempt (docs/architecture.md#webhook-delivery: 10 s). */
  WEBHOOK_TIMEOUT_MS: setting.int({ default: 10_000, min: 100, max: 60_000 }),
  /** Attempts in flight at once per replica, over all endpoints. */
  WEBHOOK_MAX_CONCURRENCY: setting.int({ default: 32, min: 1, max: 1_000 }),
  /**
   * Attempts in flight at once per replica for one project: the most of WEBHOOK_MAX_CONCURRENCY a
   * project's slow receiver or bursts of test events can hold (docs/webhook-delivery.md).
   */
  WEBHOOK_MAX_PER_PROJECT: setting.int({ default: 4, min: 1, max: 100 }),
  /** Attempts in flight at once per replica to one destination host, whichever projects' URLs name it. */
  WEBHOOK_MAX_PER_HOST: setting.int({ default: 8, min: 1, max: 1_000 }),
  WEBHOOK_MAX_PER_ENDPOINT: retiredPerEndpointSetting,
  /** Test events (the dashboard's "Send a test event") per project; beyond it 429 with Retry-After. */
  RATE_LIMIT_WEBHOOK_TEST_PER_PROJECT: rateLimitSetting('webhook-test-project', '10/1m'),
  /**
   * Manual redeliveries per project: each is a signed POST to the project's URL, like a test
   * event, so one session cannot make coinvoice send them without end; beyond it 429.
   */
  RATE_LIMIT_WEBHOOK_REDELIVER_PER_PROJECT: rateLimitSetting('webhook-redeliver-project', '60/1m'),
  /**
   * How long each webhook attempt keeps what it sent and received (headers, body, response
   * excerpt); after it only the summary stays: time, URL, status code, duration, error.
   */
  WEBHOOK_LOG_RETENTION_DAYS: setting.int({ default: 30, min: 1, max: 3_650 }),
  /** Fallback poll for due deliveries when no notification arrives. */
  WEBHOOK_POLL_INTERVAL_MS: setting.int({ default: 1_000, min: 10, max: 60_000 }),
  ...webhookDestinationSettings,
  SMTP_URL: smtpUrlSetting,
  /** From header of the emails (payout verification codes). */
  EMAIL_FROM: setting.string({ default: 'coinvoice <no-reply@coinvoice.invalid>' }),
  /**
   * Development without SMTP_URL: where emails are written, one .eml file each. Empty: the
   * "mailbox" folder in COINVOICE_DATA_DIR (the launcher's data folder), else ./.data/mailbox.
   */
  MAILBOX_DIR: setting.string({ default: '' }),
};
