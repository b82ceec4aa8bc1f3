-- Issue 27: an account exists only once its email proved itself with the emailed code, so that
-- POST /api/merchant/register answers alike whether the email has an account or not.
--
-- One row per email being signed up (register replaces it, with a new code). For an email that
-- already has an account the row is made all the same, with a code that is never sent (the owner
-- is told by email that someone tried): confirming it behaves exactly like a wrong code, so neither
-- register nor confirm tells a stranger which emails exist.
create table pending_sign_ups (
  -- Normalised like merchants.email.
  email           text primary key,
  name            text not null,
  -- argon2id, as merchants.password_hash: moved into the account on confirmation.
  password_hash   text not null,
  -- HMAC-SHA256(salt, email ':' code), never the code itself.
  code_hash       bytea,
  code_salt       bytea,
  code_expires_at timestamptz not null,
  -- Wrong codes left; at 0 the code is cleared (register again for a new one).
  attempts_left   integer not null,
  created_at      timestamptz not null default now(),
  constraint pending_sign_ups_email_normalised check (email = lower(btrim(email)) and email <> '')
);
-- Long-expired rows are removed (they hold a password hash nobody can use any more).
create index pending_sign_ups_expires_idx on pending_sign_ups (code_expires_at);
