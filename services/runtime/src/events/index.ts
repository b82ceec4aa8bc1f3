/** Events: NATS JetStream naming and setup, the transactional outbox, idempotent consumers. */
import { PROCESSED_EVENTS_DDL } from './consumer';
import { OUTBOX_DDL } from './outbox';

export * from './bus';
export * from './outbox';
export * from './consumer';

/**
 * The event tables every service needs (outbox + processed_events) as one SQL snippet. Each
 * service pastes it into its first migration file, so migrations stay plain SQL; the runtime's
 * tests apply this constant through migrate() to prove it works as shipped.
 */
export const EVENT_TABLES_DDL = `${OUTBOX_DDL}\n${PROCESSED_EVENTS_DDL}`;
