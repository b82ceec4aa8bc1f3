-- Auto-sweep rules on Bitcoin and Litecoin were checked against the house addresses before a bech32
-- witness program was compared under every UTXO prefix (docs/treasury.md#house-addresses): an
-- ltc1… spelling of a BTC deposit passed. They are checked again: unchecked, they sweep nothing
-- until the payout service's destination check has looked at them (and removed any that point at
-- an address coinvoice holds).
update auto_sweep_settings set house_checked_at = null where network in ('bitcoin', 'litecoin');
