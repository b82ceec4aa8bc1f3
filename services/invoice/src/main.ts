import { loadServiceConfig, runMain, runService, startService } from '@coinvoice/runtime';
import { invoiceService } from './server';
import { requireChainSource, watcherService } from './watcher/role';

// `main.js watch <chain>`: the chain watcher role; `main.js [migrate]`: the invoice API (serve).
if (process.argv[2] === 'watch') {
  const chain = process.argv[3] ?? '';
  runMain({
    name: `invoice watch ${chain}`,
    start: async () => {
      const definition = watcherService(chain);
      // Before any connection: a watcher without its node stops at once, with one line.
      requireChainSource(chain, loadServiceConfig(definition));
      return startService(definition);
    },
  });
} else {
  runService(invoiceService);
}
