-- Rate limit counters (DESIGN §13), shared by every replica: runtime rate-limit.ts
-- (RATE_LIMIT_COUNTERS_DDL) counts here; keys are SHA-256 hashes, never IPs or emails.
create table rate_limit_counters (
  -- policy name ':' SHA-256 of the key
  bucket       text not null,
  window_start timestamptz not null,
  expires_at   timestamptz not null,
  hits         integer not null,
  primary key (bucket, window_start)
);
create index rate_limit_counters_expires_idx on rate_limit_counters (expires_at);
