-- The Tron treasury's transactions (docs/treasury.md#tron). A row (the node's raw_data with its
-- expiration extended, its txID and the signer's signature) is stored in the transaction that
-- claims the payout, BEFORE the broadcast: a process killed after that leaves a row the next round
-- broadcasts again (a duplicate is refused by the node, nothing is sent twice); one killed before
-- leaves nothing (a signature never stored is never broadcast, and the signer signs no other
-- version of the payout until that one expired). A payout has at most one open row; a new one is
-- built only once the earlier one is `expired`: a final block is past its expiration and it is in
-- no block.
create table tron_transactions (
  id               bigint generated always as identity primary key,
  payout_id        uuid not null references payouts (id),
  asset            text not null,
  -- Base units (sun, token units) and the payout's base58 address.
  amount           numeric not null check (amount > 0),
  to_address       text not null,
  txid             text not null unique,
  -- The node's JSON raw_data (expiration as signed) and its protobuf bytes: what is broadcast.
  raw_data         jsonb not null,
  raw_data_hex     text not null,
  expiration_ms    bigint not null,
  fee_limit_sun    bigint not null default 0,
  signature        text not null,
  status           text not null check (status in ('signed', 'broadcast', 'mined', 'confirmed', 'failed', 'expired')),
  block_number     bigint,
  fee_sun          bigint,
  failure_reason   text,
  created_at       timestamptz not null default now(),
  broadcast_at     timestamptz,
  updated_at       timestamptz not null default now()
);
-- One open transaction per payout: the guard against a second transfer.
create unique index tron_transactions_open_payout on tron_transactions (payout_id) where status in ('signed', 'broadcast', 'mined');

-- A payout's transaction as built, committed BEFORE the signer is asked (as payout_sign_attempts on
-- Ethereum): a process killed while the signer answers asks again for the same bytes, which the
-- signer signs again (the same txID), instead of building another transaction the signer would
-- refuse until the first one's expiration. Deleted in the transaction that stores the signed row.
create table tron_sign_attempts (
  payout_id      uuid primary key references payouts (id),
  txid           text not null,
  raw_data       jsonb not null,
  raw_data_hex   text not null,
  expiration_ms  bigint not null,
  created_at     timestamptz not null default now()
);
