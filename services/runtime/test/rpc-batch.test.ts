/**
 * Batched calls (docs/performance.md#batched-calls): the unary calls a client makes in one turn of
 * the event loop travel as one coinvoice.rpc.v1.BatchService/Call, and each is still answered,
 * checked, logged and counted as if it had come alone.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, type ServiceImpl } from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { Registry } from 'prom-client';
import { TestCertificateAuthority } from '../../../test/support/certificates';
import { errorFacts, errors } from '../src/errors';
import { GetInvoiceRequestSchema, GetInvoiceResponseSchema, InvoiceService, type GetInvoiceRequest, type PayInvoiceRequest } from '../src/gen/coinvoice/invoice/v1/invoice_pb';
import { CallRequestSchema, CallResponseSchema, type CallResponse } from '../src/gen/coinvoice/rpc/v1/batch_pb';
import { createLogger, currentRequestId, withRequestId } from '../src/log';
import { createRpcClient, MAX_BATCH_CALLS } from '../src/rpc/client';
import { HealthMonitor } from '../src/rpc/health';
import { startRpcServer, type CallerPolicy, type RpcServer } from '../src/rpc/server';
import { decodeStatusDetails } from '../src/rpc/status-details';
import type { RpcTls } from '../src/rpc/tls';
import { rejection, sleep } from '../../../test/support/async';
import { TcpProxy } from './support/tcp-proxy';

const logger = createLogger({ service: 'rpc-batch-test', level: 'silent' });
const BATCHED = [InvoiceService.method.getInvoice, InvoiceService.method.payInvoice];
const never = () => new Promise<void>(() => undefined);

class Behaviour {
  gets: string[] = [];
  pays: string[] = [];
  requestIds = new Map<string, string | undefined>();
  onGet: (request: GetInvoiceRequest) => Promise<void> = async () => undefined;
  onPay: (request: PayInvoiceRequest) => Promise<void> = async () => undefined;
}

function fakeInvoices(behaviour: Behaviour): ServiceImpl<typeof InvoiceService> {
  const impl: Partial<ServiceImpl<typeof InvoiceService>> = {
    async getInvoice(request) {
      behaviour.gets.push(request.invoiceId);
      behaviour.requestIds.set(request.invoiceId, currentRequestId());
      await behaviour.onGet(request);
      if (request.invoiceId === 'missing') throw errors.notFound('invoice');
      if (request.invoiceId === 'boom') throw new Error('secret internals: password=hunter2');
      return { invoice: { id: request.invoiceId, orderId: `order of ${request.invoiceId}` } };
    },
    async payInvoice(request) {
      behaviour.pays.push(request.invoiceId);
      await behaviour.onPay(request);
      if (request.invoiceId === 'paid') throw errors.conflict('invoice_not_payable', 'the invoice is not Waiting');
      return { invoice: { id: request.invoiceId } };
    },
  };
  return impl as ServiceImpl<typeof InvoiceService>;
}

interface Served {
  server: RpcServer;
  behaviour: Behaviour;
  /** rpc_server_handled_total by procedure, summed over codes. */
  handled(): Promise<Record<string, number>>;
}

async function serve(options: { tls?: RpcTls; authorize?: CallerPolicy } = {}): Promise<Served> {
  const behaviour = new Behaviour();
  const metrics = new Registry();
  const server = await startRpcServer({
    port: 0,
    host: '127.0.0.1',
    routes: (router) => router.service(InvoiceService, fakeInvoices(behaviour)),
    health: new HealthMonitor([InvoiceService.typeName], []),
    logger,
    metrics,
    tls: options.tls,
    authorize: options.authorize,
  });
  return {
    server,
    behaviour,
    async handled() {
      const metric = await metrics.getSingleMetric('rpc_server_handled_total')!.get();
      const counts: Record<string, number> = {};
      for (const v of metric.values) counts[String(v.labels.procedure)] = (counts[String(v.labels.procedure)] ?? 0) + v.value;
      return counts;
    },
  };
}

const GET = 'coinvoice.invoice.v1.InvoiceService/GetInvoice';
const PAY = 'coinvoice.invoice.v1.InvoiceService/PayInvoice';
const ENVELOPE = 'coinvoice.rpc.v1.BatchService/Call';

describe('calls made together', () => {
  let served: Served;
  beforeEach(async () => {
    served = await serve();
  });
  afterEach(() => served.server.close(100));

  test('travel as one batch; each gets its own answer, a failure only its own call', async () => {
    const client = createRpcClient(InvoiceService, served.server.url, { batched: BATCHED });
    const calls = [
      client.getInvoice({ projectId: 'p', invoiceId: 'a' }),
      client.getInvoice({ projectId: 'p', invoiceId: 'missing' }),
      client.payInvoice({ projectId: 'p', invoiceId: 'paid' }),
      client.getInvoice({ projectId: 'p', invoiceId: 'boom' }),
      client.payInvoice({ projectId: 'p', invoiceId: 'b' }),
    ];
    const settled = await Promise.allSettled(calls);
    expect(await served.handled()).toEqual({ [ENVELOPE]: 1, [GET]: 3, [PAY]: 2 });
    expect(settled[0]).toMatchObject({ status: 'fulfilled', value: { invoice: { id: 'a', orderId: 'order of a' } } });
    expect(settled[4]).toMatchObject({ status: 'fulfilled', value: { invoice: { id: 'b' } } });
    const [missing, paid, boom] = [settled[1], settled[2], settled[3]].map((s) => ConnectError.from((s as PromiseRejectedResult).reason)) as [ConnectError, ConnectError, ConnectError];
    expect(errorFacts(missing)).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
    expect(errorFacts(paid)).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'invoice_not_payable', message: 'the invoice is not Waiting' });
    expect(boom.code).toBe(Code.Internal);
    expect(boom.message).not.toMatch(/hunter2|secret/);
  });

  test('each call carries its own request id to its handler', async () => {
    const client = createRpcClient(InvoiceService, served.server.url, { batched: BATCHED });
    await Promise.all(['x', 'y', 'z'].map((id) => withRequestId(`req-${id}`, () => client.getInvoice({ projectId: 'p', invoiceId: id }))));
    expect(await served.handled()).toEqual({ [ENVELOPE]: 1, [GET]: 3 });
    expect(Object.fromEntries(served.behaviour.requestIds)).toEqual({ x: 'req-x', y: 'req-y', z: 'req-z' });
  });

  test('a call alone in its turn goes as itself; methods not named batched never travel in a batch', async () => {
    const client = createRpcClient(InvoiceService, served.server.url, { batched: [InvoiceService.method.getInvoice] });
    await client.getInvoice({ projectId: 'p', invoiceId: 'alone' });
    await Promise.all([client.payInvoice({ projectId: 'p', invoiceId: 'c' }), client.payInvoice({ projectId: 'p', invoiceId: 'd' })]);
    expect(await served.handled()).toEqual({ [GET]: 1, [PAY]: 2 });
  });

  test(`more than ${MAX_BATCH_CALLS} calls in a turn go in batches of at most ${MAX_BATCH_CALLS}`, async () => {
    const client = createRpcClient(InvoiceService, served.server.url, { batched: BATCHED });
    const answers = await Promise.all(Array.from({ length: 150 }, (_, i) => client.getInvoice({ projectId: 'p', invoiceId: `i${i}` })));
    expect(answers.map((a) => a.invoice?.id)).toEqual(Array.from({ length: 150 }, (_, i) => `i${i}`));
    expect(await served.handled()).toEqual({ [ENVELOPE]: 3, [GET]: 150 });
  });

  test('calls with different deadlines go in different batches; each meets its own deadline', async () => {
    served.behaviour.onGet = (request) => (request.invoiceId.startsWith('slow') ? sleep(600) : Promise.resolve());
    const client = createRpcClient(InvoiceService, served.server.url, { batched: BATCHED });
    const started = Date.now();
    const short = rejection(client.getInvoice({ projectId: 'p', invoiceId: 'slow-1' }, { timeoutMs: 150 }));
    const short2 = rejection(client.getInvoice({ projectId: 'p', invoiceId: 'slow-2' }, { timeoutMs: 150 }));
    const long = client.getInvoice({ projectId: 'p', invoiceId: 'slow-3' }, { timeoutMs: 3_000 });
    const quick = client.getInvoice({ projectId: 'p', invoiceId: 'quick' }, { timeoutMs: 3_000 });
    expect((await short).connectCode).toBe(Code.DeadlineExceeded);
    expect((await short2).connectCode).toBe(Code.DeadlineExceeded);
    expect(Date.now() - started).toBeLessThan(500);
    expect((await long).invoice?.id).toBe('slow-3');
    expect((await quick).invoice?.id).toBe('quick');
    expect((await served.handled())[ENVELOPE]).toBe(2);
  });

  test('a caller that gives up is answered cancelled at once; the others in its batch are answered', async () => {
    served.behaviour.onGet = () => sleep(200);
    const client = createRpcClient(InvoiceService, served.server.url, { batched: BATCHED });
    const controller = new AbortController();
    const abandoned = rejection(client.getInvoice({ projectId: 'p', invoiceId: 'gone' }, { signal: controller.signal }));
    const kept = client.getInvoice({ projectId: 'p', invoiceId: 'kept' });
    await sleep(50);
    const started = Date.now();
    controller.abort();
    expect((await abandoned).connectCode).toBe(Code.Canceled);
    expect(Date.now() - started).toBeLessThan(100);
    expect((await kept).invoice?.id).toBe('kept');
  });
});

describe('a batch cut on the way', () => {
  test('writes in it are deadline_exceeded (504: they may have taken effect) and never repeated; reads in it are retried once on a fresh connection', async () => {
    const served = await serve();
    const proxy = await new TcpProxy(served.server.port).start();
    let held = true;
    served.behaviour.onGet = async () => {
      if (held) await never();
    };
    served.behaviour.onPay = never;
    try {
      const client = createRpcClient(InvoiceService, proxy.url, { batched: BATCHED });
      const read = client.getInvoice({ projectId: 'p', invoiceId: 'r' });
      const write = rejection(client.payInvoice({ projectId: 'p', invoiceId: 'w' }));
      while (served.behaviour.gets.length + served.behaviour.pays.length < 2) await sleep(5);
      held = false;
      proxy.cut();
      const err = await write;
      expect(err.connectCode).toBe(Code.DeadlineExceeded);
      expect(err.message).not.toMatch(/ECONNRESET|socket|RST_STREAM/i);
      expect((await read).invoice?.id).toBe('r');
      await sleep(200);
      expect(served.behaviour.pays).toEqual(['w']);
      expect(served.behaviour.gets).toEqual(['r', 'r']);
    } finally {
      await proxy.stop();
      await served.server.close(100);
    }
  });

  test('a server without the batch service (an older build) still answers every call, each sent alone', async () => {
    // A bare grpc-js server serving GetInvoice only, as a build from before batches would.
    const old = new grpc.Server();
    const seen: string[] = [];
    old.register(
      `/${GET}`,
      (call: grpc.ServerUnaryCall<GetInvoiceRequest, unknown>, callback: grpc.sendUnaryData<Uint8Array>) => {
        seen.push(call.request.invoiceId);
        callback(null, toBinary(GetInvoiceResponseSchema, create(GetInvoiceResponseSchema, { invoice: { id: call.request.invoiceId } })));
      },
      (bytes: Uint8Array) => Buffer.from(bytes),
      (bytes: Buffer) => fromBinary(GetInvoiceRequestSchema, bytes),
      'unary',
    );
    const port = await new Promise<number>((resolve, reject) => old.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    try {
      const client = createRpcClient(InvoiceService, `http://127.0.0.1:${port}`, { batched: BATCHED });
      const answers = await Promise.all(['o1', 'o2', 'o3'].map((id) => client.getInvoice({ projectId: 'p', invoiceId: id })));
      expect(answers.map((a) => a.invoice?.id)).toEqual(['o1', 'o2', 'o3']);
      expect(seen.sort()).toEqual(['o1', 'o2', 'o3']);
    } finally {
      old.forceShutdown();
    }
  });
});

describe('the envelope as any gRPC client sends it', () => {
  let served: Served;
  let raw: grpc.Client;
  beforeAll(async () => {
    served = await serve();
    raw = new grpc.Client(`127.0.0.1:${served.server.port}`, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    raw.close();
    await served.server.close(100);
  });

  function send(calls: { procedure: string; request: Uint8Array }[]): Promise<CallResponse> {
    const envelope = toBinary(CallRequestSchema, create(CallRequestSchema, { calls }));
    return new Promise((resolve, reject) => {
      raw.makeUnaryRequest(
        `/${ENVELOPE}`,
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from(envelope),
        { deadline: Date.now() + 3_000 },
        (err, answer) => (err ? reject(err) : resolve(fromBinary(CallResponseSchema, answer as Buffer))),
      );
    });
  }

  test('a procedure the server does not serve, or a request that does not decode, fails that call only', async () => {
    const good = toBinary(GetInvoiceRequestSchema, create(GetInvoiceRequestSchema, { projectId: 'p', invoiceId: 'fine' }));
    const answer = await send([
      { procedure: 'coinvoice.payout.v1.PayoutService/GetBalance', request: new Uint8Array() },
      { procedure: GET, request: Uint8Array.from([0xff, 0xff, 0xff]) },
      { procedure: GET, request: good },
    ]);
    const [unknown, malformed, fine] = answer.results.map((r) => r.result);
    expect(unknown?.case === 'status' && decodeStatusDetails(unknown.value, '')?.code).toBe(Code.Unimplemented);
    expect(malformed?.case === 'status' && errorFacts(decodeStatusDetails(malformed.value, '')!)).toMatchObject({ connectCode: Code.InvalidArgument, code: 'malformed_request' });
    expect(fine?.case).toBe('response');
  });

  test('more than 256 calls in one envelope are refused whole', async () => {
    const good = toBinary(GetInvoiceRequestSchema, create(GetInvoiceRequestSchema, { projectId: 'p', invoiceId: 'x' }));
    const before = served.behaviour.gets.length;
    const err = (await send(Array.from({ length: 257 }, () => ({ procedure: GET, request: good }))).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(served.behaviour.gets.length).toBe(before);
  });
});

describe('the caller policy', () => {
  test('applies to every call inside a batch: a batch reaches nothing its caller could not reach call by call', async () => {
    const ca = new TestCertificateAuthority();
    const tlsOf = (name: string): RpcTls => {
      const issued = ca.issue(name);
      return { ca: ca.ca, cert: issued.cert, key: issued.key };
    };
    // The gateway may read invoices; only the invoice service itself may pay them.
    const policy: CallerPolicy = (procedure, caller) => (procedure === GET ? caller.names.includes('gateway') : caller.names.includes('invoice'));
    const served = await serve({ tls: tlsOf('invoice'), authorize: policy });
    try {
      const gateway = createRpcClient(InvoiceService, served.server.url, { tls: tlsOf('gateway'), batched: BATCHED });
      const [read, pay] = await Promise.allSettled([gateway.getInvoice({ projectId: 'p', invoiceId: 'i' }), gateway.payInvoice({ projectId: 'p', invoiceId: 'i' })]);
      expect(await served.handled()).toMatchObject({ [ENVELOPE]: 1 });
      expect(read).toMatchObject({ status: 'fulfilled', value: { invoice: { id: 'i' } } });
      const denied = ConnectError.from((pay as PromiseRejectedResult).reason);
      expect(errorFacts(denied)).toMatchObject({ connectCode: Code.PermissionDenied, code: 'caller_not_allowed' });
      expect(served.behaviour.pays).toEqual([]);
    } finally {
      await served.server.close(100);
      ca.remove();
    }
  });
});
