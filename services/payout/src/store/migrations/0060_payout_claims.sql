-- A verified payout is claimed by an operator (or a processor) before its coins are sent
-- (services/payout/README.md "Claim before sending"): from then on the merchant cannot cancel it, so a
-- payout is never paid by hand and released back to the balance at once. The status stays
-- 'Pending' (the public word); claimed_at marks the stage.
alter table payouts add column claimed_at timestamptz;
alter table payouts add column claimed_by text;
alter table payouts add constraint payouts_claim_pending_check
  check (claimed_at is null or status in ('Pending', 'Completed', 'Rejected'));
alter table payouts add constraint payouts_claim_by_check check ((claimed_at is null) = (claimed_by is null));

-- A transaction completes one payout only. Its own table (not a unique index on payouts) so the
-- rule holds from now on whatever was completed before it existed; earlier hashes are recorded
-- first-come, and a second payout naming one of them is refused from now on.
create table payout_transactions (
  transaction_hash text primary key,
  payout_id        uuid not null unique references payouts (id),
  created_at       timestamptz not null default now()
);
insert into payout_transactions (transaction_hash, payout_id)
select distinct on (transaction_hash) transaction_hash, id
from payouts
where transaction_hash is not null
order by transaction_hash, completed_at, id
on conflict do nothing;
