/** The event tables every service migrates: the outbox, processed events and dead letters. */
import { sqlMigration } from '../migrations';
import { DEAD_LETTER_EVENTS_DDL, PROCESSED_EVENTS_DDL } from './consumer';
import { OUTBOX_DDL } from './outbox';

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
