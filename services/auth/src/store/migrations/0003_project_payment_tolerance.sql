-- A project's payment tolerance (DESIGN.md §9): how far below amountExpected a live payment
-- still pays an invoice, 0 to 5 percent; each invoice fixes it at creation.
alter table projects add column payment_tolerance_percent numeric(4, 2) not null default 0
  constraint projects_payment_tolerance_check check (payment_tolerance_percent between 0 and 5);
