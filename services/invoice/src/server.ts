import { migrationsDirOf, type ServiceDefinition } from '@coinvoice/runtime';

export const invoiceSettings = {};

/** The invoice service process: what it serves and the background work it runs. */
export const invoiceService: ServiceDefinition<typeof invoiceSettings> = {
  name: 'invoice',
  rpcServices: [],
  settings: invoiceSettings,
  migrationsDir: migrationsDirOf(__dirname),
  build() {
    return { routes() {} };
  },
};
