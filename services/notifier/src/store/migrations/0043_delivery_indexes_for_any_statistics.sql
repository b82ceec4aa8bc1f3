-- Indexes whose use does not depend on what the statistics say (docs/webhook-delivery.md#plans).
--
-- Between bursts every delivery is finished, and the statistics Postgres takes then say that no
-- delivery is pending. An index partial on `status = 'pending'` then looks empty to the planner,
-- so it read such an index from end to end instead of the primary key (recording an attempt walked
-- every due delivery to find one row by id) or instead of the ordering index (a claim's hold check
-- read every earlier pending delivery per candidate): 5-25 ms per statement during a burst.
--
-- So an index partial on the pending deliveries is usable only by the statements it serves: the due
-- order by those that compare next_attempt_at (the same rows: a pending delivery, and only one, has
-- a due time, by constraint webhook_deliveries_pending_has_due_time); the lookup of an event's
-- deliveries (event and project) by an index of both, which no other matches as closely (the
-- project's listing index, by project alone, was taken for a project the statistics had not seen).
create index webhook_deliveries_due_at_idx on webhook_deliveries (next_attempt_at, seq) where next_attempt_at is not null;
drop index webhook_deliveries_due_order_idx;
create index webhook_deliveries_event_idx on webhook_deliveries (event_id, project_id);
drop index webhook_deliveries_pending_event_idx;
