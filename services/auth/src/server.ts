import { migrationsDirOf, type ServiceDefinition } from '@coinvoice/runtime';

export const authSettings = {};

/** The auth service process: what it serves and the background work it runs. */
export const authService: ServiceDefinition<typeof authSettings> = {
  name: 'auth',
  rpcServices: [],
  settings: authSettings,
  migrationsDir: migrationsDirOf(__dirname),
  build() {
    return { routes() {} };
  },
};
