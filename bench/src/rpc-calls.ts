/**
 * `npm run bench:rpc`: what one internal call costs, alone and batched (docs/performance.md#batched-calls).
 * A child process serves a GetInvoice answering a typical invoice through the project's own RPC
 * server; this process calls it through the project's own client, 32 calls in flight, for
 * BENCH_SECONDS (default 5) per arm: each call alone, then with GetInvoice named `batched`. Prints
 * calls per second and the CPU each side spent per call.
 */
import { fork } from 'node:child_process';
import { Registry } from 'prom-client';
import { createLogger, createRpcClient, HealthMonitor, startRpcServer } from '@coinvoice/runtime';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const IN_FLIGHT = 32;

const INVOICE = {
  id: '0b9f6a57-7d3c-4a55-9a3f-2c1f9d1e7b21',
  status: 1,
  priceAmount: '19.90',
  priceCurrency: 'USD',
  priceAmountInUsd: '19.90',
  payCurrency: 'BTC',
  payNetwork: 'bitcoin',
  amountExpected: '0.00018921',
  amountReceived: '0',
  address: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq',
  successUrl: 'https://shop.example/ok',
  cancelUrl: 'https://shop.example/cancel',
  orderId: 'order-4711',
  orderDescription: 'Two mugs',
  projectName: 'Bench Shop',
};

async function serve(): Promise<void> {
  const server = await startRpcServer({
    port: 0,
    routes: (router) => router.service(InvoiceService, { getInvoice: async () => ({ invoice: INVOICE }) } as never),
    health: new HealthMonitor([InvoiceService.typeName], []),
    logger: createLogger({ service: 'bench-rpc', level: 'silent' }),
    metrics: new Registry(),
  });
  let last = process.cpuUsage();
  process.on('message', () => {
    const used = process.cpuUsage(last);
    last = process.cpuUsage();
    process.send?.({ port: server.port, cpuMs: (used.user + used.system) / 1000 });
  });
  process.send?.({ port: server.port, cpuMs: 0 });
}

async function measure(): Promise<void> {
  const child = fork(__filename, ['serve'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const reply = () => new Promise<{ port: number; cpuMs: number }>((resolve) => child.once('message', (m) => resolve(m as { port: number; cpuMs: number })));
  const { port } = await reply();
  const url = `http://127.0.0.1:${port}`;
  for (const arm of ['alone', 'batched'] as const) {
    const client = createRpcClient(InvoiceService, url, arm === 'batched' ? { batched: [InvoiceService.method.getInvoice] } : {});
    const run = async (ms: number) => {
      let calls = 0;
      const end = Date.now() + ms;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (Date.now() < end) {
            await client.getInvoice({ projectId: 'p', invoiceId: INVOICE.id });
            calls++;
          }
        }),
      );
      return calls;
    };
    await run(1_000); // warm-up
    child.send('cpu');
    await reply();
    const before = process.cpuUsage();
    const calls = await run(SECONDS * 1_000);
    const used = process.cpuUsage(before);
    child.send('cpu');
    const server = await reply();
    const clientMs = (used.user + used.system) / 1000 / calls;
    const serverMs = server.cpuMs / calls;
    console.log(
      `${arm.padEnd(7)} ${Math.round(calls / SECONDS)} calls/s; CPU per call: client ${clientMs.toFixed(3)} ms, server ${serverMs.toFixed(3)} ms, both ${(clientMs + serverMs).toFixed(3)} ms`,
    );
  }
  child.kill();
}

(process.argv[2] === 'serve' ? serve() : measure()).catch((err: unknown) => {
  console.error('bench:rpc failed:', err);
  process.exit(1);
});
