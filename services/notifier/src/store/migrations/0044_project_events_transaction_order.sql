-- A listener's position is (tx_id, seq), not seq: a transaction whose id is below the listing's
-- horizon has ended, and every later one gets a higher id, so nothing can appear behind a
-- position once listed. seq alone could be passed: a transaction with a lower id may take its seq
-- after one with a higher id (docs/webhook-delivery.md#the-listen-stream).
create index project_events_position_idx on project_events (project_id, tx_id, seq);
drop index project_events_project_idx;
