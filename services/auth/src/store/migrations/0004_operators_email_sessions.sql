-- Issue 12: operators granted by command (never by an email list), email verification, and
-- session revocation. (Numbered after main's 0003_project_payment_tolerance, which it follows.)

-- Operator: set only by `node services/auth/dist/main.js grant-operator <email>` (audit-logged).
alter table merchants add column is_operator boolean not null default false;
-- Set once the merchant proved the address (VerifyEmail). Live keys and live payouts need it.
alter table merchants add column email_verified_at timestamptz;
-- The pending verification code: HMAC-SHA256(salt, merchant id ':' code), never the code itself.
alter table merchants add column email_code_hash bytea;
alter table merchants add column email_code_salt bytea;
alter table merchants add column email_code_expires_at timestamptz;
alter table merchants add column email_code_attempts_left integer not null default 0;
-- Session tokens carry the epoch they were issued in ("sv" claim); logout, a password change and
-- an operator grant/revoke raise it, which revokes every older token of the merchant.
alter table merchants add column session_epoch integer not null default 0;
-- When the epoch was last raised: revocations older than the session TTL need no announcing.
alter table merchants add column sessions_revoked_at timestamptz;
create index merchants_sessions_revoked_idx on merchants (sessions_revoked_at) where sessions_revoked_at is not null;

-- Every grant and revoke of operator rights, with who ran the command (the OS user / Job).
create table operator_audit (
  id          bigint generated always as identity primary key,
  merchant_id uuid not null references merchants (id),
  email       text not null,
  action      text not null check (action in ('grant', 'revoke')),
  actor       text not null,
  at          timestamptz not null default now()
);
create index operator_audit_merchant_idx on operator_audit (merchant_id, at);
