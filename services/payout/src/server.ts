import { migrationsDirOf, type ServiceDefinition } from '@coinvoice/runtime';

export const payoutSettings = {};

/** The payout service process: what it serves and the background work it runs. */
export const payoutService: ServiceDefinition<typeof payoutSettings> = {
  name: 'payout',
  rpcServices: [],
  settings: payoutSettings,
  migrationsDir: migrationsDirOf(__dirname),
  build() {
    return { routes() {} };
  },
};
