-- supersedes sha256:018685a106eac5d309aac8f85e8cb76732e5ccc1533bccea592c63eef7e06b76
-- (this file as it was when it also created idempotency_keys: that table's one DDL is now the
-- runtime's, built-in migration 110, which creates it where it is missing)
-- The ledger (balances fed by invoice.paid, moved by payouts) and payouts with their verification
-- code. Money is numeric, never a float.

-- Payouts. Transitions: src/domain/status.ts (the store's SQL guards are derived from it).
create table payouts (
  id                  uuid primary key,
  project_id          uuid not null,
  -- The project's environment: a sandbox payout draws on the sandbox balance only.
  environment         text not null check (environment in ('live', 'sandbox')),
  amount              numeric not null check (amount > 0),
  currency            text not null,
  -- Canonical form of the destination (bech32 lower case, EIP-55, base58check), checksum-validated.
  address             text not null,
  note                text,
  status              text not null check (status in ('AwaitingVerification', 'Pending', 'Completed', 'Rejected', 'Cancelled')),
  transaction_hash    text,
  admin_note          text,
  cancel_reason       text check (cancel_reason in ('user', 'attempts_exhausted', 'code_expired')),
  -- The verification code: HMAC-SHA256(salt, payout id ':' code), never the code itself. Cleared
  -- once the payout leaves AwaitingVerification.
  code_hash           bytea,
  code_salt           bytea,
  code_expires_at     timestamptz not null,
  code_attempts_left  integer not null check (code_attempts_left >= 0),
  -- Millisecond precision, so the (created_at, id) history cursor round-trips through JS exactly.
  created_at          timestamptz not null,
  updated_at          timestamptz not null,
  verified_at         timestamptz,
  completed_at        timestamptz,
  rejected_at         timestamptz,
  cancelled_at        timestamptz,
  check ((status = 'AwaitingVerification') = (code_hash is not null and code_salt is not null)),
  check ((status = 'Completed') = (transaction_hash is not null and completed_at is not null)),
  check ((status = 'Rejected') = (admin_note is not null and rejected_at is not null)),
  check ((status = 'Cancelled') = (cancel_reason is not null and cancelled_at is not null)),
  check ((status in ('Pending', 'Completed', 'Rejected')) <= (verified_at is not null))
);

-- History: a project's payouts newest first, all or by status, keyset-paginated.
create index payouts_project_created_idx on payouts (project_id, created_at desc, id desc);
create index payouts_project_status_created_idx on payouts (project_id, status, created_at desc, id desc);
-- The code-expiry sweeper's queue.
create index payouts_awaiting_expiry_idx on payouts (code_expires_at) where status = 'AwaitingVerification';

-- One row per (project, environment, currency): the running sums of the ledger, updated in the
-- same transaction as every ledger entry under the row's lock. total = available + pending.
-- The checks make an overdraft impossible even for a buggy caller: the transaction fails instead.
create table balances (
  project_id  uuid not null,
  environment text not null check (environment in ('live', 'sandbox')),
  currency    text not null,
  available   numeric not null default 0 check (available >= 0),
  pending     numeric not null default 0 check (pending >= 0),
  updated_at  timestamptz not null default now(),
  primary key (project_id, environment, currency)
);

-- The append-only ledger. Each entry moves `amount` between two accounts of one balance:
--   credit_invoice  outside   → available   (an invoice.paid event; once per invoice)
--   hold            available → pending     (a payout request)
--   release         pending   → available   (cancel, attempts exhausted, code expired, reject)
--   debit           pending   → outside     (an operator completed the payout)
-- so available = Σcredit − Σhold + Σrelease and pending = Σhold − Σrelease − Σdebit.
create table ledger_entries (
  id          bigint generated always as identity primary key,
  project_id  uuid not null,
  environment text not null check (environment in ('live', 'sandbox')),
  currency    text not null,
  kind        text not null check (kind in ('credit_invoice', 'hold', 'release', 'debit')),
  amount      numeric not null check (amount > 0),
  invoice_id  uuid,
  -- Deferred: a request holds the amount before it inserts the payout, in one transaction.
  payout_id   uuid references payouts (id) deferrable initially deferred,
  -- The consumed event that caused a credit (its Nats-Msg-Id).
  event_id    text,
  created_at  timestamptz not null default now(),
  check ((kind = 'credit_invoice') = (invoice_id is not null and event_id is not null)),
  check ((kind = 'credit_invoice') = (payout_id is null))
);
-- An invoice credits once, whatever number of times (and under whatever ids) its event arrives.
create unique index ledger_entries_invoice_credit_idx on ledger_entries (invoice_id) where kind = 'credit_invoice';
-- A payout holds once and is settled once: released OR debited, never both, never twice.
create unique index ledger_entries_payout_hold_idx on ledger_entries (payout_id) where kind = 'hold';
create unique index ledger_entries_payout_settlement_idx on ledger_entries (payout_id) where kind in ('release', 'debit');
create index ledger_entries_balance_idx on ledger_entries (project_id, environment, currency, id);
