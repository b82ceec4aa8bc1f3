/**
 * A replaced webhook secret signs nothing once its overlap has ended
 * (docs/webhook-delivery.md#secret-rotation); kept any longer it is only something to leak. Erased
 * within minutes of its expiry, a bounded batch at a time.
 */
import { RetentionJob, type Logger, type Sql } from '@coinvoice/runtime';
import { eraseExpiredPreviousWebhookSecrets } from './store/projects';

export function previousSecretEraser(options: { sql: Sql; logger: Logger; intervalMs?: number }): RetentionJob {
  return new RetentionJob({
    logger: options.logger,
    component: 'previous-webhook-secret-eraser',
    intervalMs: options.intervalMs ?? 5 * 60_000,
    batchSize: 1_000,
    prune: (limit) => eraseExpiredPreviousWebhookSecrets(options.sql, limit),
  });
}
