-- Bitcoin and Litecoin signatures (docs/treasury.md#utxo-signer-policy).

-- The set of outpoints each payout was first signed with: a later signature of the payout must
-- spend exactly this set (a BIP125 fee replacement, of which only one can be mined) with a higher
-- fee, never other inputs (a second transaction paying it again).
create table utxo_payout_signatures (
  payout_id        uuid primary key,
  network          text not null,
  coin             text not null,
  amount           numeric not null,
  -- "txid:vout" of every input, sorted: the set, in one comparable form.
  inputs           text[] not null,
  -- The highest fee (base units) a transaction paying it was signed with.
  fee              numeric not null check (fee > 0),
  txid             text not null,
  signatures       integer not null default 1,
  first_signed_at  timestamptz not null default now(),
  last_signed_at   timestamptz not null default now()
);

-- Fees signed per coin and UTC day (base units); a replacement adds only what it pays above the
-- version it replaces. Locked by every UTXO signature of the coin.
create table utxo_daily_fees (
  coin  text not null,
  day   date not null,
  fee   numeric not null default 0 check (fee >= 0),
  primary key (coin, day)
);

-- What a UTXO answer was about: the transaction's fee, the outpoints it spends and the payouts it
-- pays, and its txid (also of a refused one; transaction_hash holds it only for a signature), amount
-- the payouts' total.
alter table audit_log add column txid text;
alter table audit_log add column fee numeric;
alter table audit_log add column inputs text[];
alter table audit_log add column payout_ids uuid[];
