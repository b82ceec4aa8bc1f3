/** The event tables every service migrates: the outbox, processed events and dead letters. */
import { sqlMigration } from '../migrations';

// The DDL lives here, away from the code that uses the tables (outbox.ts, consumer.ts): `migrate`
// loads this module alone (migrate-service.ts, docs/performance.md#starting).

/**
 * DDL of the outbox table. Each service copies it into its first migration
 * (`migrations/0001_*.sql`); unqualified names land in the service's schema.
 */
export const OUTBOX_DDL = `-- Transactional outbox (coinvoice runtime, events/outbox.ts): events written in the same
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
`;

/**
 * DDL of the processed-events table. Each service that consumes events copies it into its first
 * migration (`migrations/0001_*.sql`), next to the outbox DDL.
 */
export const PROCESSED_EVENTS_DDL = `-- Idempotent consumers (coinvoice runtime, events/consumer.ts): one row per event a consumer
-- has applied, written in the same transaction as the effect.
create table processed_events (
  consumer_name text not null,
  event_id      text not null,
  processed_at  timestamptz not null default now(),
  primary key (consumer_name, event_id)
);
-- For the retention sweep (deleteProcessedEvents).
create index processed_events_processed_at_idx on processed_events (processed_at);
`;

/**
 * DDL of the dead letters: messages a consumer refused to act on (a missing or wrong signature),
 * kept whole for an operator to inspect; the message itself is terminated in JetStream. A
 * built-in migration of every service (DEAD_LETTER_EVENTS_MIGRATION, events/tables.ts).
 */
export const DEAD_LETTER_EVENTS_DDL = `-- Dead letters (coinvoice runtime, events/consumer.ts): messages a consumer refused (unsigned or
-- wrongly signed events), never acted on; one row per message (stream, sequence).
create table dead_letter_events (
  id              bigint generated always as identity primary key,
  consumer_name   text not null,
  stream          text not null,
  stream_sequence bigint not null,
  subject         text not null,
  event_id        text,
  reason          text not null,
  headers         jsonb not null,
  body            bytea not null,
  received_at     timestamptz not null default now(),
  unique (consumer_name, stream, stream_sequence)
);
create index dead_letter_events_received_at_idx on dead_letter_events (received_at);
`;

/** The event tables every service needs (outbox + processed_events) as one SQL snippet. */
export const EVENT_TABLES_DDL = `${OUTBOX_DDL}\n${PROCESSED_EVENTS_DDL}`;

/**
 * Every service's migration 0001: the event tables, from this one source (migrateService applies
 * it ahead of the service's own files). Its text is byte for byte what each service once kept as
 * its own 0001_event_tables.sql, so databases that applied that file see the same checksum.
 */
export const EVENT_TABLES_MIGRATION = sqlMigration(1, 'event_tables', EVENT_TABLES_DDL);

/** Every service's dead letters (refused events: unsigned or wrongly signed), applied like migration 1. */
export const DEAD_LETTER_EVENTS_MIGRATION = sqlMigration(50, 'dead_letter_events', DEAD_LETTER_EVENTS_DDL);
