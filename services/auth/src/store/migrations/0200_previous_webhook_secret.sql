-- Webhook secret rotation with an overlap (docs/webhook-delivery.md#secret-rotation): the secret a
-- rotation replaced keeps signing deliveries, next to the new one, until
-- previous_webhook_secret_expires_at, so a receiver can deploy the new secret without a failed
-- delivery. Sealed like webhook_secret (SECRETS_KEK, bound to its row and column).
alter table projects add column previous_webhook_secret text;
alter table projects add column previous_webhook_secret_kek_id text;
alter table projects add column previous_webhook_secret_expires_at timestamptz;
-- The three are set and cleared together; a previous secret is always sealed.
alter table projects add constraint projects_previous_webhook_secret_complete check (
  (previous_webhook_secret is null and previous_webhook_secret_kek_id is null and previous_webhook_secret_expires_at is null)
  or (previous_webhook_secret like 'v1.%' and previous_webhook_secret_kek_id is not null and previous_webhook_secret_expires_at is not null)
);
-- What the eraser looks for (services/auth/src/previous-secret-eraser.ts): few rows, by expiry.
create index projects_previous_webhook_secret_expiry_idx on projects (previous_webhook_secret_expires_at)
  where previous_webhook_secret_expires_at is not null;
