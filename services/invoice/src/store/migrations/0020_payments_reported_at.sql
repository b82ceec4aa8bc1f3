-- When the ledger was told of a payment (invoice.paid or invoice.late_payment written to the
-- outbox in the same transaction): the ledger invariant check (docs/accounting.md) pages through
-- the credited payments and gives a credit that was just reported time to arrive.
alter table payments add column reported_at timestamptz;
update payments set reported_at = updated_at where reported_as is not null;
create index payments_credited_idx on payments (invoice_id) where reported_as in ('paid', 'late');
