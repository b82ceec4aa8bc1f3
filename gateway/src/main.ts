import { createLogger, loadConfig, runMain } from '@coinvoice/runtime';
import { Backends } from './backends';
import { gatewaySettings } from './config';
import { build } from './server';

runMain({
  name: 'gateway',
  async start() {
    const config = loadConfig(gatewaySettings);
    const logger = createLogger({ service: 'gateway', level: config.LOG_LEVEL });
    const backends = new Backends({
      auth: config.AUTH_URL,
      invoice: config.INVOICE_URL,
      payout: config.PAYOUT_URL,
      notifier: config.NOTIFIER_URL,
    });
    const app = build({ backends, logger, bodyLimitBytes: config.BODY_LIMIT_BYTES });
    const address = await app.listen({ port: config.GATEWAY_PORT, host: config.GATEWAY_HOST });
    logger.info({ address }, 'gateway listening');
    return { logger, running: { stop: () => app.close() } };
  },
});
