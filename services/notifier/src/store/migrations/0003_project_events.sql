-- Every webhook event of a project, whether or not it has a webhook URL, kept a day: what
-- `coinvoice listen` streams to a developer's machine (ListProjectEvents), signed on the way out.
create table project_events (
  seq        bigint generated always as identity primary key,
  project_id text not null,
  -- The event id: the webhook-id header.
  event_id   text not null unique,
  event_type text not null,
  -- The exact JSON text a delivery sends.
  body       text not null,
  created_at timestamptz not null default now()
);
-- A project's events after a cursor.
create index project_events_project_idx on project_events (project_id, seq);
-- The retention sweep.
create index project_events_created_at_idx on project_events (created_at);
