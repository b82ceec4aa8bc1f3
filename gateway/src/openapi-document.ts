/**
 * Builds the gateway with inert clients (nothing is called) to read the OpenAPI document and the
 * routes it registers: for the snapshot script and the contract tests.
 */
import { createLogger, createRpcClient } from '@coinvoice/runtime';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { PayoutService } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { ApiKeyVerifier } from './auth/api-keys';
import { SessionVerifier } from './auth/sessions';
import { Backends } from './backends';
import { GatewayRateLimits } from './rate-limits';
import { build } from './server';

export async function buildForDocument() {
  const nowhere = 'http://127.0.0.1:9';
  const auth = createRpcClient(AuthService, nowhere);
  const invoices = createRpcClient(InvoiceService, nowhere);
  const notifier = createRpcClient(NotifierService, nowhere);
  const payouts = createRpcClient(PayoutService, nowhere);
  const { app, openapi } = build({
    backends: new Backends({ auth: nowhere, invoice: nowhere, payout: nowhere, notifier: nowhere }),
    clients: { auth, invoices, notifier, payouts },
    apiKeys: new ApiKeyVerifier(auth, { ttlMs: 0 }),
    sessions: new SessionVerifier(auth),
    logger: createLogger({ service: 'gateway', level: 'silent' }),
    http: { bodyLimitBytes: 65536, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 72_000 },
    eventStreamsPerKey: 5,
    eventStreamsPerMerchant: 20,
    rateLimits: new GatewayRateLimits({
      apiPerKey: { name: 'api-key', limit: 1, windowSeconds: 1 },
      checkoutPerIp: { name: 'checkout-ip', limit: 1, windowSeconds: 1 },
    }),
  });
  await app.ready();
  return { app, openapi };
}
