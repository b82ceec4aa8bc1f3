-- The operators' queue (ListAllPayouts): every project's payouts of one status and environment,
-- oldest first.
create index payouts_status_environment_created_idx on payouts (status, environment, created_at, id);
