-- Webhook secret rotation with an overlap (docs/webhook-delivery.md#secret-rotation): every secret
-- a rotation replaced keeps signing deliveries next to the current one until its own expiry, so a
-- receiver deploys the new secret without a failed delivery — and a rotation retried because its
-- answer was lost never stops the secret the receiver still checks.
create table previous_webhook_secrets (
  id            uuid primary key,
  project_id    uuid not null references projects (id) on delete cascade,
  -- Sealed like projects.webhook_secret (SECRETS_KEK), bound to this row.
  secret        text not null constraint previous_webhook_secrets_sealed check (secret like 'v1.%'),
  secret_kek_id text not null,
  -- Signs next to the current secret until then; erased soon after (previous-secret-eraser).
  expires_at    timestamptz not null,
  created_at    timestamptz not null default now()
);
create index previous_webhook_secrets_project_idx on previous_webhook_secrets (project_id, expires_at);
create index previous_webhook_secrets_expiry_idx on previous_webhook_secrets (expires_at);
