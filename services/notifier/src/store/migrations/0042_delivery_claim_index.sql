-- Claims walk the pending deliveries in due order, (next_attempt_at, seq), and stop at their limit
-- (docs/webhook-delivery.md#claims). The index on next_attempt_at alone left Postgres reading and
-- sorting every pending delivery per claim: 15-27 ms with 9,000 waiting, one claim per webhook
-- while a backlog drains. This one is read in that order and replaces it.
create index webhook_deliveries_due_order_idx on webhook_deliveries (next_attempt_at, seq) where status = 'pending';
drop index webhook_deliveries_due_idx;
