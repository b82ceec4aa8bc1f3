-- The treasury's sweep intake (ListAccountedDeposits, docs/treasury.md#sweep-tasks) pages a chain's
-- reported payments by (reported_at, id).
create index payments_accounted_deposits_idx on payments (chain, reported_at, id) where reported_as is not null;
