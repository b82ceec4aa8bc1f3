-- Issue 12: webhook secrets and JWT signing keys are stored envelope-encrypted with SECRETS_KEK
-- (runtime secrets-at-rest.ts: "v1.<kek id>.<wrapped data key>.<value>"). The KEK id is kept in a
-- column too, so the rotation command finds the values still under an older KEK. Rows written
-- before this migration (kek id null, plaintext) are encrypted by the auth service at start.
alter table projects drop constraint projects_webhook_secret_check;
alter table projects add column webhook_secret_kek_id text;
alter table projects add constraint projects_webhook_secret_encrypted
  check (webhook_secret_kek_id is null or webhook_secret like 'v1.%');
alter table signing_keys add column private_key_kek_id text;
alter table signing_keys add constraint signing_keys_private_key_encrypted
  check (private_key_kek_id is null or private_key_pem like 'v1.%');
create index projects_webhook_secret_kek_idx on projects (webhook_secret_kek_id);
