-- A UTXO batch's change address, recorded when the batch is built (docs/treasury.md#house-addresses):
-- payouts and auto-sweep refuse it as a destination from then on, while the batch is open, once its
-- change is a coin, and after it was abandoned (coins sent there would be tracked by nobody). Rows
-- built before this column are filled by the processor at its start (it holds the account key).
alter table utxo_batches add column change_address text;
create index utxo_batches_change_address_idx on utxo_batches (lower(change_address)) where change_address is not null;
-- The same question of the confirmed change, without reading every coin.
create index utxo_coins_change_address_idx on utxo_coins (lower(address)) where branch = 1;
-- The processor's scan for confirmed batch transactions a deep reorg took off the chain
-- (docs/treasury.md#deep-reorgs) reads the versions confirmed in the last blocks at every new tip.
create index utxo_transactions_confirmed_height_idx on utxo_transactions (network, block_height) where status = 'confirmed';
