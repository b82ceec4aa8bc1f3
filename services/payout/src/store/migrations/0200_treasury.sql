-- The treasury (docs/treasury.md): payouts sent on chain by the `process <network>` role, signed by
-- the `sign` role; sweep tasks moving accounted live deposits to the treasury address.

-- A payout in flight keeps the public status 'Pending' with its transaction hash (the latest
-- version's, after a fee replacement) and confirmations; a Rejected payout may keep the hash of
-- the transaction the chain refused. So a hash no longer means Completed, but Completed still
-- needs one.
alter table payouts drop constraint payouts_check1;
alter table payouts add constraint payouts_completed_check
  check ((status = 'Completed') = (completed_at is not null) and (status <> 'Completed' or transaction_hash is not null));
-- Who asked for the payout: the merchant (RequestPayout) or the system, for a project's auto-sweep
-- configuration (created already verified).
alter table payouts add column origin text not null default 'merchant' check (origin in ('merchant', 'auto_sweep'));
-- An operator's Approve (POST /api/admin/payouts/{id}/approve): a live payout above
-- PAYOUT_AUTO_MAX_<ASSET> is sent only once approved.
alter table payouts add column approved_at timestamptz;
alter table payouts add column approved_by text;
alter table payouts add constraint payouts_approved_check check ((approved_at is null) = (approved_by is null));
-- Confirmations of the in-flight transaction, counted by the processor; null when none was sent.
alter table payouts add column confirmations integer check (confirmations >= 0);
-- The processors' queue: verified live payouts not yet claimed, oldest first.
create index payouts_unclaimed_live_idx on payouts (currency, created_at, id)
  where status = 'Pending' and claimed_at is null and environment = 'live';

-- One row per address the processor signs from on a network, with the next nonce to assign.
-- Nonces are assigned here, under the row's lock, never read from the node's pending count.
create table evm_accounts (
  network     text not null,
  address     text not null,
  next_nonce  bigint not null default 0 check (next_nonce >= 0),
  primary key (network, address)
);

-- Every signed transaction, stored before it is broadcast: recovery re-broadcasts these exact
-- bytes and never signs a new transfer for the same purpose. A fee replacement is a new row with
-- the same (network, from_address, nonce) and `replaces` pointing at the row it replaces.
create table chain_transactions (
  id                        bigint generated always as identity primary key,
  network                   text not null,
  purpose                   text not null check (purpose in ('payout', 'sweep', 'gas_top_up')),
  payout_id                 uuid references payouts (id),
  from_address              text not null,
  to_address                text not null,
  asset                     text not null,
  -- Base units (wei, token units) moved to `to_address` (for a token: the transfer's amount).
  amount                    numeric not null check (amount >= 0),
  nonce                     bigint not null check (nonce >= 0),
  gas_limit                 numeric not null,
  max_fee_per_gas           numeric not null,
  max_priority_fee_per_gas  numeric not null,
  transaction_hash          text not null unique,
  raw_transaction           text not null,
  -- signed: stored, maybe not yet broadcast; broadcast: the node accepted it; mined: in a block
  -- (block_number), counting confirmations; confirmed: final; failed: mined and reverted;
  -- replaced: a higher-fee version with the same nonce was mined or superseded it.
  status                    text not null default 'signed'
    check (status in ('signed', 'broadcast', 'mined', 'confirmed', 'failed', 'replaced')),
  replaces                  bigint references chain_transactions (id),
  block_number              bigint,
  gas_used                  numeric,
  effective_gas_price       numeric,
  failure_reason            text,
  created_at                timestamptz not null default now(),
  broadcast_at              timestamptz,
  mined_at                  timestamptz,
  updated_at                timestamptz not null default now(),
  check ((purpose = 'payout') = (payout_id is not null))
);
create index chain_transactions_open_idx on chain_transactions (network, status) where status in ('signed', 'broadcast', 'mined');
create index chain_transactions_payout_idx on chain_transactions (payout_id) where payout_id is not null;
create index chain_transactions_nonce_idx on chain_transactions (network, from_address, nonce);

-- One sweep task per accounted live deposit (a payment of an invoice, by the invoice service's
-- payment id "chain:transaction:output"): pending → sent → confirmed, or skipped_dust with the reason.
create table sweep_tasks (
  id                        bigint generated always as identity primary key,
  payment_id                text not null unique,
  invoice_id                uuid not null,
  project_id                uuid not null,
  network                   text not null,
  asset                     text not null,
  deposit_address           text not null,
  -- The deposit address's receive index under the account key (account/0/index).
  address_index             integer not null check (address_index >= 0),
  -- The deposit in base units.
  amount                    numeric not null check (amount > 0),
  status                    text not null default 'pending' check (status in ('pending', 'sent', 'confirmed', 'skipped_dust')),
  skip_reason               text,
  -- The gas top-up (tokens) and the sweep transaction; several tasks of one address share them.
  gas_top_up_transaction_id bigint references chain_transactions (id),
  transaction_id            bigint references chain_transactions (id),
  created_at                timestamptz not null default now(),
  updated_at                timestamptz not null default now(),
  check ((status = 'skipped_dust') = (skip_reason is not null)),
  check (status = 'pending' or status = 'skipped_dust' or transaction_id is not null)
);
create index sweep_tasks_open_idx on sweep_tasks (network, deposit_address, asset) where status in ('pending', 'sent');
create index sweep_tasks_created_idx on sweep_tasks (created_at desc, id desc);

-- The processor of each network records the treasury address the signer answered, for the
-- Treasury page and the metrics; the pause switch stops it from starting new transfers.
create table treasury_networks (
  network     text primary key,
  address     text not null,
  paused      boolean not null default false,
  paused_by   text,
  updated_at  timestamptz not null default now()
);
