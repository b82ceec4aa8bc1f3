/**
 * A UTXO chain under test: the invoice service (serve role) and the real `watch <chain>` role on
 * one database, the watcher reading an Esplora stand-in; helpers to read an invoice's status,
 * payments and outbox events.
 */
import type * as bitcoin from 'bitcoinjs-lib';
import { startTestService, type TestService } from '../../../../test/support/service';
import { watcherService } from '../../src/watcher/role';
import { EsploraStandIn } from './esplora-stand-in';
import { createRequest, liveProject, startInvoiceHarness, waitFor, type Harness } from './harness';

export const SAT = 100_000_000;

export interface UtxoHarness {
  h: Harness;
  watcher: TestService;
  chain: EsploraStandIn;
  liveInvoice(priceAmount?: string): Promise<{ id: string; address: string; sat: number }>;
  state(invoiceId: string): Promise<InvoiceState>;
  until(invoiceId: string, what: string, ok: (s: InvoiceState) => boolean, timeoutMs?: number): Promise<InvoiceState>;
  dispose(): Promise<void>;
}

export interface InvoiceState {
  status: string;
  amount_received: string;
  confirmations_required: number;
  expired_at: Date;
  payments: Array<{ transaction_hash: string; output_index: number; status: string; confirmations: number; amount: string }>;
  events: string[];
}

export async function startUtxoHarness(chainName: 'bitcoin' | 'litecoin', network?: bitcoin.Network, extraEnv: Record<string, string> = {}): Promise<UtxoHarness> {
  const chain = await EsploraStandIn.start(network);
  const prefix = chainName === 'bitcoin' ? 'CHAIN_BITCOIN' : 'CHAIN_LITECOIN';
  const env = { [`${prefix}_ESPLORA_URL`]: chain.url, [`${prefix}_POLL_MS`]: '100', CHAIN_SOURCE_TIMEOUT_MS: '2000', ...extraEnv };
  const h = await startInvoiceHarness({ env });
  const watcher = await startTestService(watcherService(chainName), { database: h.svc.database, namespace: h.svc.namespace, env: { ...h.svc.env, ...env } });
  const payCurrency = chainName === 'bitcoin' ? 'BTC' : 'LTC';

  const state = async (invoiceId: string): Promise<InvoiceState> => {
    const [invoice] = await h.sql<Omit<InvoiceState, 'payments' | 'events'>[]>`
      select status, amount_received::text, confirmations_required, expired_at from invoices where id = ${invoiceId}`;
    const payments = await h.sql<InvoiceState['payments']>`
      select transaction_hash, output_index, status, confirmations, amount::text from payments where invoice_id = ${invoiceId} order by id`;
    const events = await h.sql<{ event_type: string }[]>`select event_type from outbox where payload->>'invoiceId' = ${invoiceId} order by seq`;
    return { ...invoice!, payments: [...payments], events: events.map((e) => e.event_type) };
  };

  return {
    h,
    watcher,
    chain,
    state,
    async liveInvoice(priceAmount = '100.00') {
      const invoice = (await h.client.createInvoice(createRequest(liveProject(), { priceAmount, priceCurrency: 'USD', payCurrency }))).invoice!;
      return { id: invoice.id, address: invoice.address, sat: Math.round(Number(invoice.amountExpected) * SAT) };
    },
    async until(invoiceId, what, ok, timeoutMs = 20_000) {
      let last: InvoiceState | undefined;
      try {
        return await waitFor(what, async () => {
          last = await state(invoiceId);
          return ok(last) ? last : undefined;
        }, timeoutMs);
      } catch (err) {
        // What a timing question needs (a payment's block time against expiredAt, how far the
        // watcher had seen, when each event was written): watcher-outage.test.ts failed once so.
        const timing = {
          payments: await h.sql`select transaction_hash, block_number, block_time, detected_at from payments where invoice_id = ${invoiceId} order by id`,
          cursors: await h.sql`select chain, height, block_time from chain_cursors`,
          events: await h.sql`select event_type, created_at from outbox where payload->>'invoiceId' = ${invoiceId} order by seq`,
          blockTimes: chain.blocks.map((b) => [b.height, b.time]),
        };
        throw new Error(`${(err as Error).message}; last state: ${JSON.stringify(last)}; chain tip ${chain.tip.height}; timing ${JSON.stringify(timing)}`);
      }
    },
    async dispose() {
      await watcher.stop();
      await h.dispose();
      await chain.close();
    },
  };
}
