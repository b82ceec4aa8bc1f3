/**
 * Webhook attempts keep what they sent and received for WEBHOOK_LOG_RETENTION_DAYS, then only
 * their summary (docs/accounting.md, "Retention"): bodies carry customers' order data and
 * signatures, and a log kept forever is a liability, not a feature.
 */
import { RetentionJob, type Logger, type Sql } from '@coinvoice/runtime';
import { removeOldAttemptDetails } from './store/deliveries';

export function webhookLogRetention(options: { sql: Sql; logger: Logger; retentionDays: number; intervalMs?: number }): RetentionJob {
  return new RetentionJob({
    logger: options.logger,
    component: 'webhook-log-retention',
    intervalMs: options.intervalMs ?? 10 * 60_000,
    batchSize: 5_000,
    prune: (limit) => removeOldAttemptDetails(options.sql, { olderThanDays: options.retentionDays, limit }),
  });
}
