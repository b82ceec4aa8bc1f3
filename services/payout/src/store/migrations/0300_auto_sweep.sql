-- A project's auto-sweep configuration (services/payout/README.md#auto-sweep): per currency a
-- destination and a threshold. When the project's available LIVE balance in that currency reaches
-- the threshold, the ledger consumer creates a verified payout of the balance to the destination
-- (payouts.origin 'auto_sweep'), in the transaction of the credit, under the balance row's lock.
-- Sandbox projects keep a configuration but it is never acted on (the seed's sandbox rule).
create table auto_sweep_settings (
  project_id    uuid not null,
  environment   text not null check (environment in ('live', 'sandbox')),
  currency      text not null,
  -- Canonical form, validated like a payout address for the project's network.
  address       text not null,
  threshold     numeric not null check (threshold > 0),
  activated_at  timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  primary key (project_id, currency)
);

-- A change of destination waits for the code emailed to the merchant, like a payout: one pending
-- change per project (a new PUT replaces it and its code). `entries` is the JSON array of
-- {currency, address, threshold} to activate; the code is stored as a payout's (HMAC with a salt,
-- src/domain/code.ts), bound to the change's id.
create table auto_sweep_changes (
  project_id          uuid primary key,
  id                  uuid not null unique,
  environment         text not null check (environment in ('live', 'sandbox')),
  entries             jsonb not null,
  code_hash           bytea not null,
  code_salt           bytea not null,
  code_expires_at     timestamptz not null,
  code_attempts_left  integer not null check (code_attempts_left >= 0),
  created_at          timestamptz not null default now()
);

-- The approval queue of the Treasury page: live verified payouts not claimed nor approved.
create index payouts_unapproved_live_idx on payouts (currency, created_at, id)
  where status = 'Pending' and claimed_at is null and approved_at is null and environment = 'live';
