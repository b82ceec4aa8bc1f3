-- The watcher's incremental refresh (docs/watcher.md) reads the live invoices created since its
-- newest one: a range over this index, however many invoices are open or stored.
create index invoices_live_created_idx on invoices (created_at) where environment = 'live';
