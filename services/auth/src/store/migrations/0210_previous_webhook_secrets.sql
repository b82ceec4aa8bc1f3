-- Webhook secret rotation keeps every secret replaced within the overlap signing, each until its
-- own expiry (docs/webhook-delivery.md#secret-rotation), not only the last one: a rotation retried
-- because its answer was lost replaces a secret the merchant never saw, and must not stop the one
-- their receiver still checks. 0200's single slot is replaced by this table (it existed only in
-- development databases between the two migrations, and what it held is not carried over).
alter table projects drop constraint projects_previous_webhook_secret_complete;
drop index projects_previous_webhook_secret_expiry_idx;
alter table projects drop column previous_webhook_secret;
alter table projects drop column previous_webhook_secret_kek_id;
alter table projects drop column previous_webhook_secret_expires_at;

create table previous_webhook_secrets (
  id          uuid primary key,
  project_id  uuid not null references projects (id) on delete cascade,
  -- Sealed like projects.webhook_secret (SECRETS_KEK), bound to this row.
  secret      text not null constraint previous_webhook_secrets_sealed check (secret like 'v1.%'),
  secret_kek_id text not null,
  -- Signs next to the current secret until then; erased soon after (previous-secret-eraser).
  expires_at  timestamptz not null,
  created_at  timestamptz not null default now()
);
create index previous_webhook_secrets_project_idx on previous_webhook_secrets (project_id, expires_at);
create index previous_webhook_secrets_expiry_idx on previous_webhook_secrets (expires_at);
