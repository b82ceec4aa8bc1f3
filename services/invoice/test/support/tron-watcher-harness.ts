/**
 * The invoice service and its `watch tron` role against a Tron HTTP API STAND-IN (no Tron node
 * installs here; tron-stand-in.ts serves real-shaped blocks and transactions), polling every 100 ms.
 */
import { startTestService, type TestService } from '../../../../test/support/service';
import { watcherService } from '../../src/watcher/role';
import { startInvoiceHarness, type Harness } from './harness';
import { TronStandIn } from './tron-stand-in';

export interface TronWatcherHarness {
  h: Harness;
  watcher: TestService;
  chain: TronStandIn;
  dispose(): Promise<void>;
}

export async function startTronWatcherHarness(extraEnv: Record<string, string> = {}): Promise<TronWatcherHarness> {
  const chain = await TronStandIn.start();
  const env = { CHAIN_TRON_API_URL: chain.url, CHAIN_TRON_POLL_MS: '100', CHAIN_SOURCE_TIMEOUT_MS: '2000', ...extraEnv };
  const h = await startInvoiceHarness({ env });
  const watcher = await startTestService(watcherService('tron'), { database: h.svc.database, namespace: h.svc.namespace, env: { ...h.svc.env, ...env } });
  return {
    h,
    watcher,
    chain,
    async dispose() {
      await watcher.stop();
      await h.dispose();
      await chain.close();
    },
  };
}
