/**
 * The `process tron` role (docs/treasury.md#tron). PLACEHOLDER of the contract commit:
 * the Tron processor's helper replaces this file.
 */
import { ConfigError, migrationsDirOf, RATE_LIMITS_MIGRATION, type ServiceDefinition } from '@coinvoice/runtime';
import { payoutIdempotencyKeys } from '../../store/idempotency';

export const tronProcessorSettings = {} as const;

export function tronProcessorService(): ServiceDefinition<typeof tronProcessorSettings> {
  return {
    name: 'payout',
    rpcServices: [],
    callers: [],
    settings: tronProcessorSettings,
    migrationsDir: migrationsDirOf(__dirname),
    builtInMigrations: [RATE_LIMITS_MIGRATION, payoutIdempotencyKeys.migration],
    checkConfig() {
      throw new ConfigError('process <network>', 'a network with a processor', "tron");
    },
    build() {
      return { routes() {}, workers: [] };
    },
  };
}
