/**
 * Rate limits out of the way for tests of other features, which register, log in and pay from one
 * address far more than a person would. test/e2e/security.test.ts sets the real limits and proves
 * them.
 */
export const RELAXED_RATE_LIMITS: Record<string, string> = {
  RATE_LIMIT_LOGIN_PER_ACCOUNT: '100000/1m',
  RATE_LIMIT_LOGIN_PER_IP: '100000/1m',
  RATE_LIMIT_PASSWORD_CHANGE_PER_ACCOUNT: '100000/1m',
  RATE_LIMIT_API_KEY_CREATE_PER_PROJECT: '100000/1m',
  RATE_LIMIT_REGISTER_PER_IP: '100000/1m',
  RATE_LIMIT_EMAIL_CODE_PER_ACCOUNT: '100000/1m',
  RATE_LIMIT_PAYOUT_VERIFY_PER_PROJECT: '100000/1m',
  RATE_LIMIT_PAYOUT_REQUEST_PER_PROJECT: '100000/1m',
  RATE_LIMIT_API_PER_KEY: '100000/1m',
  RATE_LIMIT_API_KEY_LOOKUPS_PER_IP: '100000/1m',
  RATE_LIMIT_CHECKOUT_PER_IP: '100000/1m',
  RATE_LIMIT_WEBHOOK_TEST_PER_PROJECT: '100000/1m',
};
