-- What a compromised processor could otherwise burn without moving a coin off the seed's keys
-- (docs/treasury.md#signer-policy): fees (top-up → sweep back loops, 200 gwei tips to a colluding
-- builder, tiny payouts at a high gas limit) and gas top-ups. One row per UTC day, locked by every
-- signature of every purpose, so concurrent requests cannot both fit under a limit.
create table daily_fees (
  day             date primary key,
  -- Sum of gas_limit × max_fee_per_gas of the day's signatures: the most they can cost in fees.
  fee_wei         numeric not null default 0 check (fee_wei >= 0),
  -- Sum of the day's gas top-up values.
  gas_top_up_wei  numeric not null default 0 check (gas_top_up_wei >= 0)
);

-- The highest gas_limit × max_fee_per_gas a payout's nonce was signed with: only one version of
-- it can be mined, so a fee replacement counts only what it adds above this.
alter table payout_signatures add column max_fee_wei numeric not null default 0;
