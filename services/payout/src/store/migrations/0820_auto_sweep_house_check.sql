-- When an auto-sweep rule's destination was last checked against the addresses coinvoice holds
-- (docs/treasury.md#house-addresses). Rules activated from now on are checked when set; rules stored
-- before the check existed start unchecked: they sweep nothing until the payout service's
-- destination check has looked at them (and removed those that point at a house address).
alter table auto_sweep_settings add column house_checked_at timestamptz;
create index auto_sweep_settings_unchecked_idx on auto_sweep_settings (project_id) where house_checked_at is null;
