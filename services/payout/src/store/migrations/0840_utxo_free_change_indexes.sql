-- Change indexes handed out to batches the signer refused before signing anything (dissolved,
-- docs/treasury.md#signer-refusals): no transaction ever paid them, so the next batch takes one of
-- these before a new index. A payout the signer keeps refusing would otherwise use up a fresh
-- change address at every retry, and a wallet restored from the seed stops looking past 20 unused.
create table utxo_free_change_indexes (
  network     text not null,
  change_index integer not null check (change_index >= 1),
  primary key (network, change_index)
);
