-- The auth service's own data: merchants, the JWT signing keys, projects and API keys.
-- Secrets that can be stored as one-way hashes are (passwords: argon2id PHC; API keys: SHA-256).
-- The webhook secret is kept as issued, because the notifier needs it to sign deliveries.

create table merchants (
  id            uuid primary key default gen_random_uuid(),
  -- Stored normalised (trimmed, lower-case) so the unique index makes emails unique
  -- case-insensitively; the check keeps a code path that forgets to normalise from slipping by.
  email         text not null,
  -- argon2id PHC string: $argon2id$v=19$m=…,t=…,p=…$salt$hash
  password_hash text not null,
  name          text not null,
  created_at    timestamptz not null default now(),
  constraint merchants_email_normalised check (email = lower(btrim(email)) and email <> ''),
  constraint merchants_password_hash_argon2id check (password_hash like '$argon2id$%')
);
create unique index merchants_email_key on merchants (email);

-- Ed25519 keys that sign session JWTs. The active key is the one not retired (at most one: the
-- partial unique index). A retired key stays (and is published in the JWKS) until every token it
-- signed has expired, i.e. retired_at + the session TTL; after that rotation deletes it.
create table signing_keys (
  -- RFC 7638 thumbprint of the public key (the JWT header's kid).
  kid             text primary key,
  -- PKCS#8 PEM of the Ed25519 private key.
  private_key_pem text not null,
  created_at      timestamptz not null default now(),
  retired_at      timestamptz
);
create unique index signing_keys_single_active on signing_keys ((true)) where retired_at is null;

create table projects (
  id                       uuid primary key default gen_random_uuid(),
  merchant_id              uuid not null references merchants (id),
  name                     text not null,
  -- Fixed at creation: decides the API key prefix (SBX_ / LIVE_) and whose money is real.
  environment              text not null constraint projects_environment_check check (environment in ('live', 'sandbox')),
  -- null: no webhook configured.
  webhook_url              text,
  -- Standard Webhooks secret "whsec_<base64>".
  webhook_secret           text not null constraint projects_webhook_secret_check check (webhook_secret like 'whsec\_%'),
  -- Bounds of the rule itself live in the domain (validation.ts); the database only refuses nonsense.
  invoice_lifetime_minutes integer not null default 60
    constraint projects_invoice_lifetime_check check (invoice_lifetime_minutes > 0),
  created_at               timestamptz not null default now(),
  updated_at               timestamptz not null default now()
);
-- ListProjects (oldest first) and every ownership check (id, merchant_id).
create index projects_merchant_idx on projects (merchant_id, created_at, id);

create table api_keys (
  id             uuid primary key default gen_random_uuid(),
  project_id     uuid not null references projects (id),
  name           text not null,
  -- Lowercase hex SHA-256 of the plain key: VerifyApiKey looks keys up by it.
  key_hash       text not null constraint api_keys_key_hash_check check (key_hash ~ '^[0-9a-f]{64}$'),
  -- "SBX_" / "LIVE_" + the first 8 random characters, shown in listings.
  display_prefix text not null,
  created_at     timestamptz not null default now(),
  revoked_at     timestamptz,
  -- Updated lazily (at most about once a minute per key) by VerifyApiKey.
  last_used_at   timestamptz
);
create unique index api_keys_key_hash_key on api_keys (key_hash);
-- ListApiKeys (newest first).
create index api_keys_project_idx on api_keys (project_id, created_at desc, id desc);
