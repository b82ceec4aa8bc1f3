-- Delivery order and fairness (docs/webhook-delivery.md).

-- Order is kept per project and event key (not per URL: every attempt goes to the project's URL of
-- the moment), and only behind an earlier original still on its first attempt: once that one has
-- failed, later events of the invoice no longer wait for its retries.
drop index webhook_deliveries_ordering_idx;
create index webhook_deliveries_ordering_idx on webhook_deliveries (project_id, event_key, seq)
  where status = 'pending' and redelivery_of is null and event_key is not null and attempt_count = 0;

-- A pending delivery closed without an attempt of its own because another delivery of the same
-- event (a redelivery, or the original) succeeded: the receiver has the event, so it is not sent
-- again.
alter table webhook_deliveries add column delivered_by uuid references webhook_deliveries (id);

-- The pending deliveries of an event, closed when one of them succeeds.
create index webhook_deliveries_pending_event_idx on webhook_deliveries (event_id) where status = 'pending';
