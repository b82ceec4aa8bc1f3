/**
 * What the webhook end-to-end tests share: invoices created and paid through the gateway, the
 * delivery log read through the gateway, the system's log files, and cleanup of the test's
 * JetStream streams.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { connectNats } from '@coinvoice/runtime';
import { apiKeyHeader, bearer, type GatewayClient, type MerchantFixture } from '../support/http';
import { testNatsUrl } from '../support/infra';
import type { BootedSystem } from '../support/system';

export { eventually, Receiver, type ReceivedRequest } from '../../services/notifier/test/support/receiver';
export { mailHeader, mailText, SmtpInbox } from '../../services/notifier/test/support/smtp';

export interface PaidInvoice {
  id: string;
  orderId: string;
  amountReceived: number;
  payCurrency: string;
  /** Date.now() just before the pay request was sent. */
  payStartedAt: number;
  /** Date.now() when its response had arrived. */
  payAnsweredAt: number;
}

export async function createInvoice(api: GatewayClient, key: string, extra: Record<string, unknown> = {}): Promise<{ id: string; orderId: string }> {
  const res = await api.post(
    '/api/invoice',
    { priceAmount: '25.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/thanks', cancelUrl: 'https://shop.example/cart', ...extra },
    { headers: apiKeyHeader(key) },
  );
  if (res.status !== 201) throw new Error(`create invoice failed: ${res.status} ${res.text}`);
  return { id: res.body.id, orderId: res.body.orderId };
}

export async function payInvoice(api: GatewayClient, key: string, invoiceId: string): Promise<PaidInvoice> {
  const payStartedAt = Date.now();
  const res = await api.post(`/api/invoice/${invoiceId}/sandbox/pay`, {}, { headers: apiKeyHeader(key) });
  if (res.status !== 200) throw new Error(`sandbox pay failed: ${res.status} ${res.text}`);
  return { id: res.body.id, orderId: res.body.orderId, amountReceived: res.body.amountReceived, payCurrency: res.body.payCurrency, payStartedAt, payAnsweredAt: Date.now() };
}

export async function createAndPay(api: GatewayClient, key: string, extra: Record<string, unknown> = {}): Promise<PaidInvoice> {
  const invoice = await createInvoice(api, key, extra);
  return payInvoice(api, key, invoice.id);
}

/** Runs `task` for 0…count-1 with at most `concurrency` at once; results in index order. */
export async function bounded<T>(count: number, concurrency: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results = new Array<T>(count);
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) {
      const i = next++;
      results[i] = await task(i);
    }
  });
  await Promise.all(lanes);
  return results;
}

export async function deliveryLog(api: GatewayClient, merchant: MerchantFixture, projectId: string, query = '') {
  const res = await api.get(`/api/merchant/projects/${projectId}/webhook-deliveries${query}`, { headers: bearer(merchant.token) });
  if (res.status !== 200) throw new Error(`delivery log failed: ${res.status} ${res.text}`);
  return res.body as {
    items: Array<{ id: string; eventId: string; eventType: string; status: string; attemptCount: number; redeliveryOf: string | null; payload: string; url: string }>;
    nextCursor: string | null;
    endpoint: { url: string | null; lastSuccessAt: string | null; consecutiveFailures: number };
  };
}

/** Every delivery of a project, following the cursor. */
export async function allDeliveries(api: GatewayClient, merchant: MerchantFixture, projectId: string) {
  const items: Awaited<ReturnType<typeof deliveryLog>>['items'] = [];
  let cursor: string | null = null;
  do {
    const page: Awaited<ReturnType<typeof deliveryLog>> = await deliveryLog(api, merchant, projectId, `?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

export function logsText(system: BootedSystem): string {
  const dir = path.join(system.dataDir, 'logs');
  return readdirSync(dir)
    .map((f) => readFileSync(path.join(dir, f), 'utf8'))
    .join('\n');
}

export function logOf(system: BootedSystem, process: string): string {
  return readFileSync(path.join(system.dataDir, 'logs', `${process}.log`), 'utf8');
}

/** Deletes the JetStream streams of the test's event namespace (the shared NATS server keeps them otherwise). */
export async function deleteStreams(namespace: string): Promise<void> {
  const nats = await connectNats({ url: testNatsUrl(), name: 'e2e-cleanup' });
  try {
    const jsm = await nats.jetstreamManager();
    const prefix = `${namespace.toUpperCase()}_`;
    for await (const stream of jsm.streams.list()) {
      if (stream.config.name.startsWith(prefix)) await jsm.streams.delete(stream.config.name).catch(() => undefined);
    }
  } finally {
    await nats.close();
  }
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}
