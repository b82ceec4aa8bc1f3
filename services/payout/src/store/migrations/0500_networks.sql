-- Balances and payouts per (currency, network) (docs/networks.md#balances-and-payouts,
-- docs/accounting.md): USDT on bsc is another balance than USDT on ethereum. Existing rows are
-- on their currency's default network (services/chains/src/currencies.ts DEFAULT_NETWORK: the
-- only network there was before networks); the CASE below is that table, once, for the backfill.
alter table balances add column network text;
alter table ledger_entries add column network text;
alter table payouts add column network text;
alter table auto_sweep_settings add column network text;

update balances set network = case currency
  when 'BTC' then 'bitcoin' when 'LTC' then 'litecoin' when 'ETH' then 'ethereum' when 'USDT' then 'ethereum'
  when 'USDC' then 'ethereum' when 'TRX' then 'tron' when 'POL' then 'polygon' when 'BNB' then 'bsc' end;
update ledger_entries set network = case currency
  when 'BTC' then 'bitcoin' when 'LTC' then 'litecoin' when 'ETH' then 'ethereum' when 'USDT' then 'ethereum'
  when 'USDC' then 'ethereum' when 'TRX' then 'tron' when 'POL' then 'polygon' when 'BNB' then 'bsc' end;
update payouts set network = case currency
  when 'BTC' then 'bitcoin' when 'LTC' then 'litecoin' when 'ETH' then 'ethereum' when 'USDT' then 'ethereum'
  when 'USDC' then 'ethereum' when 'TRX' then 'tron' when 'POL' then 'polygon' when 'BNB' then 'bsc' end;
update auto_sweep_settings set network = case currency
  when 'BTC' then 'bitcoin' when 'LTC' then 'litecoin' when 'ETH' then 'ethereum' when 'USDT' then 'ethereum'
  when 'USDC' then 'ethereum' when 'TRX' then 'tron' when 'POL' then 'polygon' when 'BNB' then 'bsc' end;
-- A pending auto-sweep change's entries name their network from now on.
update auto_sweep_changes set entries = (
  select coalesce(jsonb_agg(e || jsonb_build_object('network', case e->>'currency'
    when 'BTC' then 'bitcoin' when 'LTC' then 'litecoin' when 'ETH' then 'ethereum' when 'USDT' then 'ethereum'
    when 'USDC' then 'ethereum' when 'TRX' then 'tron' when 'POL' then 'polygon' when 'BNB' then 'bsc' end)), '[]'::jsonb)
  from jsonb_array_elements(entries) e);

-- No default: every writer names the network (a forgotten one fails here, not silently on ethereum).
alter table balances alter column network set not null;
alter table ledger_entries alter column network set not null;
alter table payouts alter column network set not null;
alter table auto_sweep_settings alter column network set not null;

alter table balances drop constraint balances_pkey;
alter table balances add primary key (project_id, environment, currency, network);
drop index ledger_entries_balance_idx;
create index ledger_entries_balance_idx on ledger_entries (project_id, environment, currency, network, id);
-- One rule per (currency, network): USDT on bsc and USDT on ethereum are swept separately.
alter table auto_sweep_settings drop constraint auto_sweep_settings_pkey;
alter table auto_sweep_settings add primary key (project_id, currency, network);
-- The processors' queues are per network (docs/treasury.md#processor).
drop index payouts_unclaimed_live_idx;
create index payouts_unclaimed_live_idx on payouts (network, currency, created_at, id)
  where status = 'Pending' and claimed_at is null and environment = 'live';
