/**
 * The `process bitcoin|litecoin` role (docs/treasury.md#utxo). PLACEHOLDER of the contract commit:
 * the UTXO processor's helper replaces this file.
 */
import { ConfigError, migrationsDirOf, RATE_LIMITS_MIGRATION, type ServiceDefinition } from '@coinvoice/runtime';
import { payoutIdempotencyKeys } from '../../store/idempotency';

export const utxoProcessorSettings = {} as const;

export function utxoProcessorService(network: 'bitcoin' | 'litecoin'): ServiceDefinition<typeof utxoProcessorSettings> {
  return {
    name: 'payout',
    rpcServices: [],
    callers: [],
    settings: utxoProcessorSettings,
    migrationsDir: migrationsDirOf(__dirname),
    builtInMigrations: [RATE_LIMITS_MIGRATION, payoutIdempotencyKeys.migration],
    checkConfig() {
      throw new ConfigError('process <network>', 'a network with a processor', network);
    },
    build() {
      return { routes() {}, workers: [] };
    },
  };
}
