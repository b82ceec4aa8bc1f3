-- supersedes sha256:23fbb733f56f1f62279bfec7ba2422ea19ff0afd283db151088c3079df7ecfc2
-- (the same migration before its comment cited docs/architecture.md)
-- Late payments (invoice.late_payment, docs/architecture.md#derived-status): confirmed live money that invoice.paid did
-- not include — after expiry, after Paid, overpayments in a later transaction — is credited once
-- per payment (chain:transaction:output), never twice, whatever the event ids.
alter table ledger_entries add column payment_id text;
alter table ledger_entries drop constraint ledger_entries_kind_check;
alter table ledger_entries add constraint ledger_entries_kind_check
  check (kind in ('credit_invoice', 'credit_late_payment', 'hold', 'release', 'debit'));
alter table ledger_entries drop constraint ledger_entries_check;
alter table ledger_entries drop constraint ledger_entries_check1;
alter table ledger_entries add constraint ledger_entries_credit_source_check
  check ((kind in ('credit_invoice', 'credit_late_payment')) = (invoice_id is not null and event_id is not null));
alter table ledger_entries add constraint ledger_entries_credit_payout_check
  check ((kind in ('credit_invoice', 'credit_late_payment')) = (payout_id is null));
alter table ledger_entries add constraint ledger_entries_late_payment_check
  check ((kind = 'credit_late_payment') = (payment_id is not null));
create unique index ledger_entries_late_payment_credit_idx on ledger_entries (payment_id) where kind = 'credit_late_payment';
