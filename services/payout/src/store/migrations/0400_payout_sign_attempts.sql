-- The processor's payouts whose signature was asked for and not (yet) stored (docs/treasury.md#processor).
-- Written and committed BEFORE the signer is asked, deleted in the transaction that stores the
-- signed bytes: a row left behind means a process died (or the call failed) between the two, and
-- the signer may have signed that payout for the treasury's next nonce — which it will sign it for
-- only (docs/treasury.md#signer-policy). Such a payout is asked again before any other transfer
-- takes a treasury nonce.
create table payout_sign_attempts (
  payout_id     uuid primary key references payouts (id),
  network       text not null,
  attempted_at  timestamptz not null default now()
);
