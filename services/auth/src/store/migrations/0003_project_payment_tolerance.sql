-- supersedes sha256:177a5bfa7190e0e14cfe9cb7425967c8017ab5f6d284d048bc1b3f3ec57b1d8b
-- (the same migration before its comment cited docs/architecture.md)
-- A project's payment tolerance (docs/architecture.md#derived-status): how far below amountExpected a live payment
-- still pays an invoice, 0 to 5 percent; each invoice fixes it at creation.
alter table projects add column payment_tolerance_percent numeric(4, 2) not null default 0
  constraint projects_payment_tolerance_check check (payment_tolerance_percent between 0 and 5);
