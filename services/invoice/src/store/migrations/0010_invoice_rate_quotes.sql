-- supersedes sha256:73e1d70625901a11a6defa808243538957273dec0f579921fceedb2f406c0f97
-- (the same migration before its comment cited docs/architecture.md)
-- Where each invoice's rate came from (docs/architecture.md#rates): the providers whose quotes made it
-- ("coinbase", "kraken") or "static" (the shipped or configured table), and the time of the oldest
-- quote used. Invoices created before live rates came from the static table.
-- Numbered 0010 so migrations of parallel branches (0004…) sort before it.
alter table invoices
  add column rate_sources   text[] not null default '{static}' check (cardinality(rate_sources) > 0),
  add column rate_quoted_at timestamptz;
