-- Networks (docs/networks.md): an invoice is paid in an asset ON A NETWORK. Existing invoices are on
-- their asset's default network, which was the only one (BTC bitcoin, LTC litecoin, ETH/USDT/USDC
-- ethereum, TRX tron).
alter table invoices add column pay_network text;
update invoices set pay_network = case pay_currency
  when 'BTC' then 'bitcoin' when 'LTC' then 'litecoin' when 'TRX' then 'tron'
  when 'POL' then 'polygon' when 'BNB' then 'bsc' else 'ethereum' end;
-- No check constraint listing the networks: the registry (services/chains) is the one list, and
-- CreateInvoice stores only a network it resolved there; adding a network is no migration.
alter table invoices alter column pay_network set not null;

-- The watcher's address set is per network family now (every EVM watcher watches every issued EVM
-- address, docs/networks.md#wrong-network): by pay_network instead of pay_currency.
drop index invoices_live_watch_idx;
create index invoices_live_watch_idx on invoices (pay_network, expired_at)
  where environment = 'live' and status <> 'Paid';
