-- The account xpub a UTXO network's signer answered with its treasury address: a processor that
-- starts while the signer cannot be reached follows its transactions in flight with the treasury
-- the signer gave before (docs/treasury.md#processor). Null for Ethereum and Tron (no account key).
alter table treasury_networks add column account_xpub text;
