-- Retention of what an attempt sent and received (docs/accounting.md, "Retention"): after
-- WEBHOOK_LOG_RETENTION_DAYS the request headers and body and the response excerpt are removed;
-- the summary (when, where, status code, duration, error) stays. details_removed_at says when.
alter table webhook_attempts add column details_removed_at timestamptz;
create index webhook_attempts_retention_idx on webhook_attempts (attempted_at) where details_removed_at is null;
