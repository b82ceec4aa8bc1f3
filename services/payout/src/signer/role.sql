-- The signer's database role (services/payout/README.md, "Signer"), run once by a database
-- administrator after `payout sign migrate` (which runs as the owner of schema signer). The signer
-- itself connects as coinvoice_signer: it may append to its audit and keep its counters, and read
-- payout.payouts, nothing else. No UPDATE, DELETE or TRUNCATE on signer.audit_log (a trigger
-- refuses them besides), no ownership, so it cannot drop that trigger either.
create role coinvoice_signer login;
grant usage on schema signer to coinvoice_signer;
grant select, insert on signer.audit_log to coinvoice_signer;
grant select, insert, update on signer.daily_totals, signer.daily_fees, signer.payout_signatures to coinvoice_signer;
grant select, insert, update on signer.utxo_payout_signatures, signer.utxo_daily_fees to coinvoice_signer;
grant usage on schema payout to coinvoice_signer;
grant select on payout.payouts to coinvoice_signer;
grant select, insert, update on signer.tron_payout_signatures to coinvoice_signer;
