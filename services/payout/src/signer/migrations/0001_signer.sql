-- The signer's own schema (docs/treasury.md#signer-policy): the audit of every signature and
-- refusal, the per-asset daily totals and the one nonce each payout may be signed for. Applied by
-- `payout sign migrate` as the schema's owner; the signer itself runs as coinvoice_signer, which
-- may only INSERT into audit_log (services/payout/README.md, "Signer").

-- One row per answer: a signature (transaction_hash) or a refusal (rule). Append-only.
create table audit_log (
  id                bigint generated always as identity primary key,
  created_at        timestamptz not null default now(),
  outcome           text not null check (outcome in ('signed', 'refused')),
  -- The certificate name the call came with ('payout-processor'), or 'plaintext' in development.
  caller            text not null,
  network           text,
  purpose           text check (purpose in ('payout', 'sweep', 'gas_top_up')),
  payout_id         uuid,
  address_index     integer,
  asset             text,
  from_address      text,
  -- The transaction's `to` (for a token transfer, the token contract).
  to_address        text,
  -- Who receives the value: `to`, or for a token transfer the call's recipient.
  recipient         text,
  -- Base units moved to `recipient` (wei or token units).
  amount            numeric,
  chain_id          numeric,
  nonce             numeric,
  gas_limit         numeric,
  max_fee_per_gas   numeric,
  transaction_hash  text,
  -- The refused rule's code (amount_above_limit, …) and why, in words.
  rule              text,
  reason            text,
  check ((outcome = 'signed') = (transaction_hash is not null)),
  check ((outcome = 'refused') = (rule is not null))
);
create index audit_log_payout_idx on audit_log (payout_id) where payout_id is not null;

-- Nobody rewrites the audit, not even the schema's owner by mistake.
create function audit_log_append_only() returns trigger language plpgsql as $$
begin
  raise exception 'signer.audit_log is append-only (% refused)', tg_op;
end;
$$;
create trigger audit_log_no_update_delete before update or delete on audit_log
  for each row execute function audit_log_append_only();
create trigger audit_log_no_truncate before truncate on audit_log
  for each statement execute function audit_log_append_only();

-- What was signed per asset and UTC day (payout purposes only), locked by each payout signature.
create table daily_totals (
  asset   text not null,
  day     date not null,
  amount  numeric not null default 0 check (amount >= 0),
  primary key (asset, day)
);

-- The one transfer a payout was signed for: a later request must repeat chain id, nonce, to,
-- value and data (a fee replacement) and does not count against the daily limit again.
create table payout_signatures (
  payout_id         uuid primary key,
  asset             text not null,
  amount            numeric not null,
  chain_id          numeric not null,
  nonce             numeric not null,
  to_address        text not null,
  value             numeric not null,
  data              text not null,
  transaction_hash  text not null,
  signatures        integer not null default 1,
  first_signed_at   timestamptz not null default now(),
  last_signed_at    timestamptz not null default now()
);
