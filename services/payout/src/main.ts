import { loadServiceConfig, runMain, runService, startService } from '@coinvoice/runtime';
import { processorService, requireProcessorNode } from './processor/role';
import { payoutService } from './server';

// `main.js process <network>`: the payout processor role (docs/treasury.md#processor);
// `main.js [migrate]`: the payout API (serve).
if (process.argv[2] === 'process') {
  const network = process.argv[3] ?? '';
  runMain({
    name: `payout process ${network}`,
    start: async () => {
      const definition = processorService(network);
      // Before any connection: a processor without its node stops at once, with one line.
      requireProcessorNode(network, loadServiceConfig(definition));
      return startService(definition);
    },
  });
} else {
  runService(payoutService);
}
