-- The signer's last refusal of a live payout (docs/treasury.md#signer-refusals): a payout above
-- SIGNER_MAX_PAYOUT_<ASSET>, or past the day's limit, stays Pending and unsent; the Treasury page
-- lists it with the reason, so an operator rejects it or raises the limit instead of never knowing.
-- Cleared when the payout is signed.
alter table payouts add column signer_refusal text;
alter table payouts add column signer_refused_at timestamptz;
create index payouts_signer_refused_idx on payouts (network, signer_refused_at) where signer_refusal is not null and status = 'Pending';

-- The processor's scan for confirmed transfers a deep reorg took off the chain (docs/treasury.md#deep-reorgs)
-- reads the last day's confirmed senders every few minutes.
create index chain_transactions_confirmed_recent_idx on chain_transactions (network, updated_at) where status = 'confirmed';
