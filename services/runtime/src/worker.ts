/**
 * What a service runs beside its RPC handlers (an outbox relay, a sweeper, a consumer): started
 * after the RPC port is up, stopped in order on shutdown. Its own module so that workers
 * (periodic-worker.ts, events/) and the service runner (service.ts) both depend on it and not on
 * each other.
 */
export interface Worker {
  start(): void | Promise<void>;
  stop(): Promise<void>;
}
