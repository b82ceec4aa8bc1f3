-- supersedes sha256:9abfe0ffe88e58ad92f89339b7d76b46fdedfa0b48f9a7ed5ee01fa9de27eebc
-- (this file as it was when it also created idempotency_keys: that table's one DDL is now the
-- runtime's, built-in migration 110, which creates it where it is missing)
-- Invoices and the keys their addresses are derived from.

-- The account-level extended public keys invoice addresses are derived from, one row per key
-- MATERIAL (sha-256 of chain code and public key), not per currency or serialization: when ETH,
-- USDT and USDC are configured with the same key (or one key as xpub and zpub) they share one
-- counter, so no two invoices ever get the same address. `next_index` is the next unused receive
-- index (account/0/index); CreateInvoice takes it with `update … set next_index = next_index + 1
-- returning` in the invoice's own transaction, which makes concurrent creations queue on the row.
create table address_keys (
  id         integer generated always as identity primary key,
  key_hash   text not null unique,
  -- The serialization first registered (xpub/tpub/zpub/…), for operators.
  xpub       text not null,
  -- BIP32 non-hardened indexes stop at 2^31 - 1.
  next_index bigint not null default 0 check (next_index between 0 and 2147483648),
  created_at timestamptz not null default now()
);

-- Development key pairs, generated on first start for every coin and network without a configured
-- key (INVOICE_XPUB_<COIN>[_TESTNET]) and kept so addresses stay the same across restarts and
-- replicas. The private key is kept only so development funds stay recoverable: configure real
-- keys for anything that matters (see services/invoice/README.md).
create table development_keys (
  currency   text not null,
  network    text not null check (network in ('mainnet', 'testnet')),
  path       text not null,
  xprv       text not null,
  xpub       text not null,
  created_at timestamptz not null default now(),
  primary key (currency, network)
);

create table invoices (
  id                  uuid primary key,
  project_id          uuid not null,
  environment         text not null check (environment in ('live', 'sandbox')),
  project_name        text not null,
  order_id            text,
  order_description   text,
  -- Money is numeric, never a float. price_amount in price_currency's minor units.
  price_amount        numeric not null check (price_amount > 0),
  price_currency      text not null,
  price_amount_in_usd numeric not null check (price_amount_in_usd >= 0),
  pay_currency        text not null,
  -- Price of one pay_currency unit in price_currency, fixed at creation.
  rate                numeric not null check (rate > 0),
  amount_expected     numeric not null check (amount_expected > 0),
  amount_received     numeric not null default 0 check (amount_received >= 0),
  -- Public spellings; transitions: src/domain/status.ts.
  status              text not null default 'Waiting' check (status in ('Waiting', 'Paid', 'Expired')),
  address             text not null unique,
  key_id              integer not null references address_keys (id),
  address_index       integer not null check (address_index >= 0),
  success_url         text not null,
  cancel_url          text not null,
  is_donation         boolean not null default false,
  transaction_hash    text,
  -- Millisecond precision, so the (created_at, id) list cursor round-trips through JS exactly.
  created_at          timestamptz not null,
  expired_at          timestamptz not null,
  paid_at             timestamptz,
  unique (key_id, address_index),
  check (expired_at > created_at),
  check ((status = 'Paid') = (paid_at is not null)),
  check ((status = 'Paid') = (transaction_hash is not null))
);

-- ListInvoices: a project's invoices newest first, all or by status, keyset-paginated.
create index invoices_project_created_idx on invoices (project_id, created_at desc, id desc);
create index invoices_project_status_created_idx on invoices (project_id, status, created_at desc, id desc);
-- The expiry sweeper's queue.
create index invoices_waiting_expiry_idx on invoices (expired_at) where status = 'Waiting';
