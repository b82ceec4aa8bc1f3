/**
 * The SSRF guard lives in the shared runtime (services/runtime/src/ssrf.ts) so the auth service
 * can refuse a webhook URL when a project is configured, with the very checks the notifier runs
 * before every delivery. Re-exported here for the notifier's own modules and tests.
 */
export {
  classifyIpAddress,
  createSsrfGuard,
  pinnedLookup,
  ssrfModeOf,
  systemResolver,
  webhookDestinationSettings,
  webhookUrlPolicyOf,
  type AddressCategory,
  type ClassifiedAddress,
  type ConfigCheck,
  type DestinationVerdict,
  type HostResolver,
  type RefusalReason,
  type ResolvedAddress,
  type SsrfGuard,
  type SsrfMode,
} from '@coinvoice/runtime';
