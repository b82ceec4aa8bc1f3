-- The UTXO treasury (docs/treasury.md#utxo): Bitcoin and Litecoin payouts spend accounted deposit
-- outputs and the change of the processor's own transactions, several payouts batched in one
-- transaction, replaced (BIP125) only by versions spending the same inputs.

-- One batch: the payouts it pays and the coins it spends, fixed when it is built. `open` until one
-- of its versions is mined to the network's confirmation count (`confirmed`), or `abandoned` when
-- provably none can ever be mined (an input spent by another transaction at final depth).
create table utxo_batches (
  id             bigint generated always as identity primary key,
  network        text not null,
  status         text not null default 'open' check (status in ('open', 'confirmed', 'abandoned')),
  -- The change output's key: account/1/change_index (null: no version has change... until one does).
  change_index   integer check (change_index >= 0),
  -- The version mined to final depth.
  confirmed_txid text,
  failure_reason text,
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now(),
  check ((status = 'confirmed') = (confirmed_txid is not null))
);
create index utxo_batches_open_idx on utxo_batches (network) where status = 'open';

-- The payouts of a batch: output `output_index` of every version pays `amount` to `address`.
create table utxo_batch_payouts (
  batch_id      bigint not null references utxo_batches (id),
  payout_id     uuid not null references payouts (id),
  output_index  integer not null check (output_index >= 0),
  address       text not null,
  amount        bigint not null check (amount > 0),
  primary key (batch_id, payout_id),
  unique (batch_id, output_index)
);
-- A payout is paid by one batch only, ever: a batch is never followed by another for its payouts.
create unique index utxo_batch_payouts_payout_idx on utxo_batch_payouts (payout_id);

-- Spendable outputs of the account: deposits (branch 0, from the invoice service's accounted
-- deposits, by payment id) and the change of confirmed batches (branch 1). `batch_id` is the
-- batch that spends it (reserved when the batch is built, committed before the signer is asked);
-- `spent` once that batch is confirmed, or an input was spent elsewhere.
create table utxo_coins (
  id              bigint generated always as identity primary key,
  network         text not null,
  txid            text not null check (txid ~ '^[0-9a-f]{64}$'),
  vout            integer not null check (vout >= 0),
  amount          bigint not null check (amount > 0),
  address         text not null,
  branch          smallint not null check (branch in (0, 1)),
  address_index   integer not null check (address_index >= 0),
  -- The invoice's payment id ("chain:txid:vout") of a deposit; null for change.
  payment_id      text unique,
  -- The batch whose confirmed transaction made this change.
  change_of_batch bigint references utxo_batches (id),
  batch_id        bigint references utxo_batches (id),
  spent           boolean not null default false,
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now(),
  unique (network, txid, vout),
  check ((branch = 0) = (payment_id is not null)),
  check (not spent or batch_id is not null or branch = 0)
);
create index utxo_coins_available_idx on utxo_coins (network, amount) where batch_id is null and not spent;

-- The versions of a batch. A version is `built` (its unsigned PSBT stored, committed before the
-- signer is asked: a process killed after the signer answered asks again with these exact bytes),
-- `signed` (raw transaction and txid stored before the broadcast), `broadcast`, `mined`,
-- `confirmed`, `replaced` (a higher-fee version of the same inputs superseded it, or another
-- version was confirmed) or `failed` (provably never minable).
create table utxo_transactions (
  id                  bigint generated always as identity primary key,
  batch_id            bigint not null references utxo_batches (id),
  network             text not null,
  psbt                text not null,
  -- Inputs minus outputs at build time (the signer answers the same), base units; the rate asked, msat/vB.
  fee                 bigint not null check (fee > 0),
  fee_rate            bigint not null check (fee_rate > 0),
  change_amount       bigint check (change_amount > 0),
  change_output_index integer,
  txid                text unique check (txid ~ '^[0-9a-f]{64}$'),
  raw_transaction     text,
  vsize               integer,
  status              text not null default 'built'
    check (status in ('built', 'signed', 'broadcast', 'mined', 'confirmed', 'replaced', 'failed')),
  replaces            bigint references utxo_transactions (id),
  block_height        integer,
  block_hash          text,
  failure_reason      text,
  created_at          timestamptz not null default now(),
  broadcast_at        timestamptz,
  mined_at            timestamptz,
  updated_at          timestamptz not null default now(),
  check ((status = 'built') = (txid is null)),
  check ((txid is null) = (raw_transaction is null)),
  check ((change_amount is null) = (change_output_index is null))
);
create index utxo_transactions_batch_idx on utxo_transactions (batch_id, id);
create index utxo_transactions_open_idx on utxo_transactions (network, status) where status in ('built', 'signed', 'broadcast', 'mined');

-- The next fresh index of the treasury's change branch per network (account/1/i; 0 is the
-- treasury address itself). Taken under the row's lock in the transaction that builds the batch.
create table utxo_change_indexes (
  network     text primary key,
  next_index  integer not null check (next_index >= 1)
);

-- One transaction may complete several payouts: a batch's outputs (docs/treasury.md#utxo). A
-- completion by hand or by the EVM processor names the whole transaction (output_index null) and
-- stays one payout per hash; a batch records one row per payout output.
alter table payout_transactions add column output_index integer check (output_index >= 0);
alter table payout_transactions drop constraint payout_transactions_pkey;
create unique index payout_transactions_output_idx on payout_transactions (transaction_hash, coalesce(output_index, -1));
