/**
 * Where a project's webhook may point, beyond syntax. `checkWebhookUrl` (validation.ts) decides
 * the shape (absolute http(s), no credentials, ≤ 2048 characters); a policy decides the
 * destination. The auth service ships the syntax-only policy: refusing private, loopback and
 * link-local destinations in production (SSRF, docs/architecture.md#ssrf) needs DNS and the deployment mode
 * and belongs to the notifier's issue, which plugs its guard in here (`defineAuthService({
 * webhookUrlPolicy })` in server.ts) and keeps checking at delivery time as well.
 */
export interface WebhookUrlPolicy {
  /**
   * Why `url` (already syntactically valid) must not be a webhook destination, as a message for
   * the `webhookUrl` field violation; undefined when it is acceptable.
   */
  refusal(url: string): Promise<string | undefined>;
}

/** Accepts every syntactically valid URL: the default until the notifier's SSRF guard is wired in. */
export const syntaxOnlyWebhookUrlPolicy: WebhookUrlPolicy = {
  refusal: () => Promise.resolve(undefined),
};
