-- A version the signer refused before signing anything of its batch ends 'failed' without a txid
-- when the batch is dissolved (docs/treasury.md#signer-refusals); every other version has its txid
-- from its signature on, and a 'built' one has none.
alter table utxo_transactions drop constraint utxo_transactions_check;
alter table utxo_transactions add constraint utxo_transactions_status_txid_check
  check ((status = 'built' and txid is null) or (status = 'failed') or (status not in ('built', 'failed') and txid is not null));
