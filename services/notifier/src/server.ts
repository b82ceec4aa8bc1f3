import { migrationsDirOf, type ServiceDefinition } from '@coinvoice/runtime';

export const notifierSettings = {};

/** The notifier service process: what it serves and the background work it runs. */
export const notifierService: ServiceDefinition<typeof notifierSettings> = {
  name: 'notifier',
  rpcServices: [],
  settings: notifierSettings,
  migrationsDir: migrationsDirOf(__dirname),
  build() {
    return { routes() {} };
  },
};
