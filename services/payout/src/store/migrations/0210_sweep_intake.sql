-- Where each network's sweep intake is in the invoice service's accounted deposits
-- (ListAccountedDeposits, keyset (reported_at, row id); docs/treasury.md#sweep-tasks).
create table sweep_intake_cursors (
  network     text primary key,
  reported_at timestamptz not null,
  row_id      bigint not null,
  updated_at  timestamptz not null default now()
);
