-- A listener's cursor must never pass an event that has not committed yet: seq is taken at insert,
-- so a transaction can commit an event whose seq is below one already listed. Each row records its
-- transaction; ListProjectEvents returns only rows of transactions older than every one still
-- running (the snapshot's xmin), so nothing below the cursor can appear later.
alter table project_events add column tx_id xid8 not null default pg_current_xact_id();
