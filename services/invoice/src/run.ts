import { createLogger, loadServiceConfig, runMain, runService, startService } from '@coinvoice/runtime';
import { invoiceService } from './server';
import { requireChainSource, verifyChainSource, watcherService } from './watcher/role';

// `main.js watch <chain>`: the chain watcher role; `main.js`: the invoice API (serve). (`migrate` is main.ts's.)
if (process.argv[2] === 'watch') {
  const chain = process.argv[3] ?? '';
  runMain({
    name: `invoice watch ${chain}`,
    start: async () => {
      const definition = watcherService(chain);
      // Before any connection: a watcher without its node stops at once, with one line; so does
      // one whose node is another chain, or whose token has other decimals than the registry's.
      const config = loadServiceConfig(definition);
      requireChainSource(chain, config);
      const logger = createLogger({ service: definition.name, level: config.LOG_LEVEL });
      await verifyChainSource(chain, config, (line) => logger.warn(line));
      return startService(definition);
    },
  });
} else {
  runService(invoiceService);
}
