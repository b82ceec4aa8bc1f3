/** Keeps project_events (what `coinvoice listen` streams) to a day: a listener wants what happens now. */
import { RetentionJob, type Logger, type Sql } from '@coinvoice/runtime';
import { deleteOldProjectEvents } from './store/project-events';

export const PROJECT_EVENTS_RETENTION_MS = 24 * 60 * 60_000;

export function projectEventsRetention(options: { sql: Sql; logger: Logger }): RetentionJob {
  return new RetentionJob({
    logger: options.logger,
    component: 'project-events-retention',
    intervalMs: 10 * 60_000,
    batchSize: 5_000,
    prune: (limit) => deleteOldProjectEvents(options.sql, { olderThanMs: PROJECT_EVENTS_RETENTION_MS, limit }),
  });
}
