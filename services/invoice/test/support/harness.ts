/**
 * What the invoice service tests share: the service started in-process (fresh database, own event
 * namespace), a Connect gRPC client, direct SQL for honest setup (backdating expired_at) and
 * checks, and a reader of the service's JetStream stream.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@connectrpc/connect';
import type { NatsConnection } from 'nats';
import { createRpcClient, EventNamespace } from '@coinvoice/runtime';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { InvoiceService, type CreateInvoiceRequest } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { waitFor } from '../../../../test/support/async';
import { startTestService, type TestServiceOptions } from '../../../../test/support/service';
import { openServiceHarness, type ServiceHarnessBase } from '../../../../test/support/service-harness';
import { invoiceService } from '../../src/server';

export type InvoiceClient = Client<typeof InvoiceService>;
/** A CreateInvoice request as a plain object (what the client accepts). */
export type CreateRequest = Omit<CreateInvoiceRequest, '$typeName' | '$unknown'>;

/** The invoice service's harness; `sql` is a pool on its database, search_path = invoice. */
export interface Harness extends ServiceHarnessBase {
  client: InvoiceClient;
}

/** Settings every test service gets unless overridden: a fast sweeper. */
export const FAST_SWEEP = { INVOICE_SWEEP_INTERVAL_MS: '100' };

export async function startInvoiceHarness(options: TestServiceOptions = {}): Promise<Harness> {
  const svc = await startTestService(invoiceService, { ...options, env: { ...FAST_SWEEP, ...options.env } });
  const client = createRpcClient(InvoiceService, svc.url, { timeoutMs: 20_000 });
  // A test sharing another's namespace leaves its streams to that test.
  const base = await openServiceHarness(svc, {
    schema: 'invoice',
    poolSize: 3,
    natsName: 'invoice-test',
    streams: options.namespace ? [] : ['invoice'],
  });
  return { ...base, client };
}

export function sandboxProject(name = 'Sandbox Shop') {
  return { projectId: randomUUID(), environment: Environment.SANDBOX, projectName: name };
}

export function liveProject(name = 'Live Shop') {
  return { projectId: randomUUID(), environment: Environment.LIVE, projectName: name };
}

/** A valid CreateInvoice request for `project`, with `overrides`. */
export function createRequest(
  project: { projectId: string; environment: Environment; projectName: string },
  overrides: Partial<CreateRequest> = {},
): CreateRequest {
  return {
    ...project,
    priceAmount: '19.99',
    priceCurrency: 'USD',
    payCurrency: 'BTC',
    successUrl: 'https://shop.example/success',
    cancelUrl: 'https://shop.example/cancel',
    orderId: `order-${randomUUID().slice(0, 8)}`,
    orderDescription: 'Two coffees',
    isDonation: false,
    validateOnly: false,
    ...overrides,
  };
}

export { rejection, sleep, waitFor } from '../../../../test/support/async';

/** Runs `task` over `items` with at most `limit` in flight. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const runners = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index] as T, index);
    }
  });
  await Promise.all(runners);
  return results;
}

export interface StreamEvent {
  msgId: string;
  type: string;
  subject: string;
  payload: Record<string, unknown>;
}

/** Every event in the service's stream `<NS>_INVOICE`, read with an ordered consumer. */
export async function streamEvents(nats: NatsConnection, namespace: string): Promise<StreamEvent[]> {
  const stream = new EventNamespace(namespace).streamName('invoice');
  const jsm = await nats.jetstreamManager();
  const { state } = await jsm.streams.info(stream);
  if (state.messages === 0) return [];
  const consumer = await nats.jetstream().consumers.get(stream);
  const events: StreamEvent[] = [];
  while (events.length < state.messages) {
    const batch = await consumer.fetch({ max_messages: state.messages - events.length, expires: 2_000 });
    let got = 0;
    for await (const msg of batch) {
      got += 1;
      events.push({
        msgId: msg.headers?.get('Nats-Msg-Id') ?? '',
        type: msg.headers?.get('event-type') ?? '',
        subject: msg.subject,
        payload: msg.json<Record<string, unknown>>(),
      });
    }
    if (got === 0) throw new Error(`stream ${stream} holds ${state.messages} messages but only ${events.length} were delivered`);
  }
  return events;
}

/** Waits until the outbox has relayed everything, then returns the stream's events of `type`. */
export async function publishedEvents(h: Harness, type: string, atLeast: number): Promise<StreamEvent[]> {
  return waitFor(`${atLeast} ${type} event(s) on JetStream`, async () => {
    const [pending] = await h.sql<{ n: number }[]>`select count(*)::int as n from outbox where published_at is null`;
    if ((pending?.n ?? 1) > 0) return undefined;
    const events = (await streamEvents(h.nats, h.svc.namespace)).filter((e) => e.type === type);
    return events.length >= atLeast ? events : undefined;
  });
}
