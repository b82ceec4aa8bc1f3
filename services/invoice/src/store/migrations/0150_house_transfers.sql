-- What the house (the treasury: a sweep's gas) sent to a watched address, as the block scan saw it:
-- not a payment, and balance reconciliation subtracts it from the address's balance so the house's
-- money is never credited to a merchant (watcher.ts reconcile). Orphaned with its block on a reorg.
create table house_transfers (
  chain text not null,
  transaction_hash text not null,
  output_index integer not null,
  address text not null,
  asset text not null,
  amount numeric not null check (amount > 0),
  block_number bigint not null,
  primary key (chain, transaction_hash, output_index)
);
create index house_transfers_address_idx on house_transfers (chain, asset, lower(address), block_number);
