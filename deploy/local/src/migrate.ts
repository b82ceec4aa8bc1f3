/** `npm run migrate`: applies every service's migrations to DATABASE_URL (default: local Postgres). */
import { migrateAll } from './system';

const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
migrateAll(databaseUrl, process.env).then(
  () => console.log('migrations applied'),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  },
);
