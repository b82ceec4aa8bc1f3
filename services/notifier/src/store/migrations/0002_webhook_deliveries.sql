-- supersedes sha256:cfdf2bad5e95d95a975e937b8814c6ebd1b296cc9b22428778c9f832f8bc926a
-- (the same migration before its comment cited docs/architecture.md)
-- Webhook deliveries (docs/architecture.md#webhook-delivery): one row per event to deliver to one project's endpoint, every
-- HTTP attempt recorded exactly as sent, and each endpoint's health.

-- One event to one URL. An original delivery is created by the event consumer in the transaction
-- that records the event as processed (at most one per event: the partial unique index); a
-- redelivery is a new row of the same event (same event_id, so the same webhook-id, same body)
-- pointing at the delivery it was asked from.
create table webhook_deliveries (
  id                   uuid primary key,
  -- Creation order: newest-first listing and cursors, and the order of deliveries that share an
  -- ordering key (url, event_key).
  seq                  bigint generated always as identity unique,
  project_id           text not null,
  -- The event id: the webhook-id header of every attempt.
  event_id             text not null,
  event_type           text not null,
  -- What the event is about (the invoice or payout id): deliveries of one key to one URL are sent
  -- in order. Null: no ordering constraint.
  event_key            text,
  url                  text not null,
  -- The exact JSON text that is signed and sent, byte for byte, on every attempt.
  body                 text not null,
  status               text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
  attempt_count        integer not null default 0 check (attempt_count >= 0),
  -- When the next attempt is due (pending only). While an attempt is in flight it is pushed past
  -- the attempt's timeout (the lease), so a replica that dies mid-send leaves the delivery to be
  -- picked up again when the lease runs out: at least once.
  next_attempt_at      timestamptz,
  -- Who holds the lease of the attempt in flight; only that holder may record its outcome.
  lease_token          uuid,
  redelivery_of        uuid references webhook_deliveries (id),
  last_attempt_at      timestamptz,
  last_response_status integer,
  last_error           text,
  finished_at          timestamptz,
  created_at           timestamptz not null default now(),
  updated_at           timestamptz not null default now(),
  constraint webhook_deliveries_pending_has_due_time check ((status = 'pending') = (next_attempt_at is not null))
);

-- An event becomes at most one original delivery, whatever replays the bus makes.
create unique index webhook_deliveries_original_event_idx on webhook_deliveries (event_id) where redelivery_of is null;
-- The worker's queue: due pending deliveries.
create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'pending';
-- Ordering: is an earlier original delivery of the same key to the same URL still pending?
create index webhook_deliveries_ordering_idx on webhook_deliveries (url, event_key, seq)
  where status = 'pending' and redelivery_of is null and event_key is not null;
-- The delivery log: a project's deliveries, newest first.
create index webhook_deliveries_project_idx on webhook_deliveries (project_id, seq desc);

-- Every HTTP attempt of a delivery, recorded exactly as sent, including the ones the SSRF guard
-- refused before any connection (no response, error says why).
create table webhook_attempts (
  id                    bigint generated always as identity primary key,
  delivery_id           uuid not null references webhook_deliveries (id),
  attempt_number        integer not null check (attempt_number >= 1),
  attempted_at          timestamptz not null,
  url                   text not null,
  -- The headers sent, including webhook-id, webhook-timestamp and webhook-signature.
  request_headers       jsonb not null,
  request_body          text not null,
  -- Null when no response came (timeout, connection error, refused destination).
  response_status       integer,
  -- The first bytes of the response body, for display (bounded by the worker).
  response_body_excerpt text not null default '',
  duration_ms           integer not null check (duration_ms >= 0),
  -- Null when a response came; else the transport error, timeout or refusal.
  error                 text
);
create index webhook_attempts_delivery_idx on webhook_attempts (delivery_id, attempt_number, id);

-- Health of each project's endpoint (per URL), updated with every attempt, so a silent endpoint is
-- noticed in the delivery log.
create table webhook_endpoints (
  project_id           text not null,
  url                  text not null,
  last_attempt_at      timestamptz,
  last_success_at      timestamptz,
  last_failure_at      timestamptz,
  -- Failed attempts since the last success.
  consecutive_failures integer not null default 0,
  primary key (project_id, url)
);
