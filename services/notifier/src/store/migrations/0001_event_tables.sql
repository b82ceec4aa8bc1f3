-- Transactional outbox (coinvoice runtime, events/outbox.ts): events written in the same
-- transaction as the state change, relayed to NATS JetStream with msgID = event_id.
create table outbox (
  seq          bigint generated always as identity primary key,
  event_id     uuid not null unique,
  event_type   text not null,
  event_key    text,
  payload      jsonb not null,
  request_id   text,
  created_at   timestamptz not null default now(),
  published_at timestamptz
);
-- The relay's queue: unpublished rows in order, kept small by marking and the retention sweep.
create index outbox_unpublished_idx on outbox (seq) where published_at is null;

-- Idempotent consumers (coinvoice runtime, events/consumer.ts): one row per event a consumer
-- has applied, written in the same transaction as the effect.
create table processed_events (
  consumer_name text not null,
  event_id      text not null,
  processed_at  timestamptz not null default now(),
  primary key (consumer_name, event_id)
);
-- For the retention sweep (deleteProcessedEvents).
create index processed_events_processed_at_idx on processed_events (processed_at);
