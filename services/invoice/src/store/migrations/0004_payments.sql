-- supersedes sha256:6d649d588ef450874b7c63363b72ce22c093bc3a47d96817eb577199399284ff
-- (the same migration before its comment cited docs/architecture.md)
-- Live payments (docs/architecture.md#payments-as-rows): payments as rows, a cursor and recent blocks per chain, the live
-- statuses, and what an invoice fixed at creation for its payment rules.

alter table invoices drop constraint invoices_status_check;
alter table invoices add constraint invoices_status_check
  check (status in ('Waiting', 'Confirming', 'PartiallyPaid', 'Paid', 'Expired'));
-- Fixed at creation: the project's paymentTolerancePercent and the chain's confirmation count
-- (0 for sandbox invoices, which are never watched).
alter table invoices add column payment_tolerance_percent numeric not null default 0
  check (payment_tolerance_percent between 0 and 5);
alter table invoices add column confirmations_required integer not null default 0
  check (confirmations_required >= 0);

-- The expiry sweeper's queue now covers every open status.
drop index invoices_waiting_expiry_idx;
create index invoices_open_expiry_idx on invoices (expired_at)
  where status in ('Waiting', 'Confirming', 'PartiallyPaid');
-- The watcher's address set: open live invoices and those expired within the monitoring window.
create index invoices_live_watch_idx on invoices (pay_currency, expired_at)
  where environment = 'live' and status <> 'Paid';

-- One row per (chain, transaction, output): a re-scanned block never double-counts. A payment
-- orphaned by a reorg and mined again keeps its row (its block columns change).
create table payments (
  id               bigint generated always as identity primary key,
  chain            text not null,
  transaction_hash text not null,
  -- ERC-20 log index, UTXO output index, or -1 for the transaction's own native value.
  output_index     integer not null,
  invoice_id       uuid not null references invoices (id),
  address          text not null,
  asset            text not null,
  amount           numeric not null check (amount > 0),
  block_number     bigint,
  block_hash       text,
  block_time       timestamptz,
  confirmations    integer not null default 0 check (confirmations >= 0),
  status           text not null check (status in ('seen', 'confirmed', 'final', 'orphaned', 'replaced')),
  detected_at      timestamptz not null default date_trunc('milliseconds', now()),
  updated_at       timestamptz not null default now(),
  -- How the ledger heard of it, once: 'paid' (in invoice.paid's amount), 'late' (its own
  -- invoice.late_payment, credited) or 'uncredited' (reported, another asset). Never set twice.
  reported_as      text check (reported_as in ('paid', 'late', 'uncredited')),
  unique (chain, transaction_hash, output_index),
  check ((block_number is null) = (block_hash is null))
);
create index payments_invoice_idx on payments (invoice_id, id);
-- Payments whose confirmations still change.
create index payments_unsettled_idx on payments (chain, block_number) where status in ('seen', 'confirmed');

-- Where each chain's watcher is: the last block it processed completely.
create table chain_cursors (
  chain      text primary key,
  height     bigint not null,
  hash       text not null,
  -- The block's timestamp: the sweeper expires a live invoice only once its chain's watcher has
  -- processed blocks past expiredAt (a watcher outage never expires a paid invoice).
  block_time timestamptz not null,
  updated_at timestamptz not null default now()
);

-- The recent canonical blocks the watcher processed, to find the fork point of a reorg.
create table chain_blocks (
  chain       text not null,
  height      bigint not null,
  hash        text not null,
  parent_hash text not null,
  primary key (chain, height)
);
