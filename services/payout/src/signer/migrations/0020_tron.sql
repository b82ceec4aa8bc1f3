-- The Tron treasury's signatures (docs/treasury.md#tron): the one live transaction of a payout.
-- A Tron transaction has no nonce; what keeps a payout from being paid twice is its expiration:
-- a payout is signed again only once its earlier transaction's expiration has passed (the network
-- then refuses that one for ever), and the processor proves it was not mined before asking.
create table tron_payout_signatures (
  payout_id         uuid primary key,
  asset             text not null,
  amount            numeric not null,
  txid              text not null,
  -- Unix milliseconds: the signed transaction's raw_data.expiration.
  expiration_ms     bigint not null,
  signatures        integer not null default 1,
  first_signed_at   timestamptz not null default now(),
  last_signed_at    timestamptz not null default now()
);
