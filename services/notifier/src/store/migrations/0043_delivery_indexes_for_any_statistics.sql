-- The lookup of an event's pending deliveries by both its columns (docs/webhook-delivery.md#plans).
--
-- Between bursts every delivery is finished, and the statistics Postgres takes then say that no
-- delivery is pending and know no project of the next burst. Closing an event's other deliveries
-- after a success (event and project given) then went through the project's listing index, by
-- project alone, and read every delivery of a project the statistics had not seen. An index of
-- both columns matches that lookup more closely than any other, whatever the statistics say.
create index webhook_deliveries_pending_event_project_idx on webhook_deliveries (event_id, project_id) where status = 'pending';
drop index webhook_deliveries_pending_event_idx;
