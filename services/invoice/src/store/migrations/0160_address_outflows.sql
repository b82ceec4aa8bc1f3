-- What left a watched address, as the block scan saw it (docs/watcher.md#what-left-an-address): a
-- sweep's value and fee, a token transfer from it. Balance reconciliation adds it back, so money that
-- arrives after a sweep without a transaction of its own (an internal transfer from a contract
-- wallet) is still found. Orphaned with its block on a reorg.
create table address_outflows (
  chain text not null,
  transaction_hash text not null,
  output_index integer not null,
  address text not null,
  asset text not null,
  amount numeric not null check (amount > 0),
  block_number bigint not null,
  primary key (chain, transaction_hash, output_index)
);
create index address_outflows_address_idx on address_outflows (chain, asset, lower(address), block_number);
