/**
 * The internal RPC engine (grpc-js underneath Connect handlers and clients): a service's own
 * errors keep their code and details; a transport failure is `unavailable` or
 * `deadline_exceeded`, never a conflict and never the socket's words; reads are retried once on a
 * fresh connection and writes never; request ids travel; close lets in-flight calls finish;
 * mutual TLS refuses callers without a certificate and checks each caller per RPC.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, type ServiceImpl } from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { Registry } from 'prom-client';
import { TestCertificateAuthority } from '../../../test/support/certificates';
import { errorFacts, errors, httpStatusOf } from '../src/errors';
import { Health, HealthCheckRequestSchema, HealthCheckResponse_ServingStatus as ServingStatus, HealthCheckResponseSchema } from '../src/gen/grpc/health/v1/health_pb';
import {
  GetInvoiceRequestSchema,
  InvoiceService,
  type GetInvoiceRequest,
  type PayInvoiceRequest,
} from '../src/gen/coinvoice/invoice/v1/invoice_pb';
import { createLogger, currentRequestId, withRequestId } from '../src/log';
import { createRpcClient } from '../src/rpc/client';
import { HealthMonitor } from '../src/rpc/health';
import { startRpcServer, type CallerPolicy, type RpcServer } from '../src/rpc/server';
import type { RpcTls } from '../src/rpc/tls';
import { TcpProxy } from './support/tcp-proxy';

const logger = createLogger({ service: 'rpc-test', level: 'silent' });

/** Controls how the fake invoice service answers. */
class Behaviour {
  getCalls = 0;
  payCalls = 0;
  /** Called when a call arrives; resolves when the handler may answer. */
  onGet: (request: GetInvoiceRequest) => Promise<void> = async () => undefined;
  onPay: (request: PayInvoiceRequest) => Promise<void> = async () => undefined;
  seenRequestIds: (string | undefined)[] = [];
}

function fakeInvoices(behaviour: Behaviour): ServiceImpl<typeof InvoiceService> {
  const impl: Partial<ServiceImpl<typeof InvoiceService>> = {
    async getInvoice(request) {
      behaviour.getCalls++;
      behaviour.seenRequestIds.push(currentRequestId());
      await behaviour.onGet(request);
      if (request.invoiceId === 'missing') throw errors.notFound('invoice');
      if (request.invoiceId === 'boom') throw new Error('secret internals: password=hunter2');
      return { invoice: { id: request.invoiceId, status: 1 } };
    },
    async payInvoice(request) {
      behaviour.payCalls++;
      await behaviour.onPay(request);
      if (request.invoiceId === 'paid') throw errors.conflict('invoice_not_payable', 'the invoice is not Waiting');
      return { invoice: { id: request.invoiceId } };
    },
  };
  return impl as ServiceImpl<typeof InvoiceService>;
}

async function serve(behaviour: Behaviour, options: { port?: number; tls?: RpcTls; authorize?: CallerPolicy; healthPort?: number } = {}): Promise<RpcServer> {
  return startRpcServer({
    port: options.port ?? 0,
    host: '127.0.0.1',
    routes: (router) => router.service(InvoiceService, fakeInvoices(behaviour)),
    health: new HealthMonitor([InvoiceService.typeName], []),
    logger,
    metrics: new Registry(),
    tls: options.tls,
    authorize: options.authorize,
    healthPort: options.healthPort,
  });
}

const never = () => new Promise<void>(() => undefined);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function rejection(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('the call succeeded');
}

describe('answers', () => {
  let behaviour: Behaviour;
  let server: RpcServer;
  beforeAll(async () => {
    behaviour = new Behaviour();
    server = await serve(behaviour);
  });
  afterAll(() => server.close(1_000));

  test('a call answers with the handler\'s message', async () => {
    const client = createRpcClient(InvoiceService, server.url);
    const res = await client.getInvoice({ projectId: 'p', invoiceId: 'inv-1' });
    expect(res.invoice?.id).toBe('inv-1');
  });

  test('a service\'s own error keeps its code, stable error code and message (409 stays 409)', async () => {
    const client = createRpcClient(InvoiceService, server.url);
    const err = await rejection(client.payInvoice({ projectId: 'p', invoiceId: 'paid' }));
    const facts = errorFacts(err);
    expect(facts).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'invoice_not_payable', message: 'the invoice is not Waiting' });
    expect(httpStatusOf(facts.connectCode, facts.code)).toBe(409);
    const missing = errorFacts(await rejection(client.getInvoice({ projectId: 'p', invoiceId: 'missing' })));
    expect(missing).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
  });

  test('an unexpected error answers a bare internal error: nothing of it leaks', async () => {
    const client = createRpcClient(InvoiceService, server.url);
    const err = await rejection(client.getInvoice({ projectId: 'p', invoiceId: 'boom' }));
    expect(err.code).toBe(Code.Internal);
    expect(err.message).not.toMatch(/hunter2|secret/);
  });

  test('a method the implementation lacks answers unimplemented', async () => {
    const client = createRpcClient(InvoiceService, server.url);
    const err = await rejection(client.listInvoices({ projectId: 'p' }));
    expect(err.code).toBe(Code.Unimplemented);
  });

  test('the current request id travels to the handler', async () => {
    const client = createRpcClient(InvoiceService, server.url);
    await withRequestId('req-42', () => client.getInvoice({ projectId: 'p', invoiceId: 'x' }));
    expect(behaviour.seenRequestIds).toContain('req-42');
  });

  test('a plain grpc-js client with no project code reads the error detail and the health status', async () => {
    const target = new URL(server.url).host;
    const plain = new grpc.Client(target, grpc.credentials.createInsecure());
    const request = Buffer.from(toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service: InvoiceService.typeName })));
    const status = await new Promise<ServingStatus>((resolve, reject) => {
      plain.makeUnaryRequest(
        '/grpc.health.v1.Health/Check',
        (m: Buffer) => m,
        (b: Buffer) => fromBinary(HealthCheckResponseSchema, b).status,
        request,
        (err, res) => (err ? reject(err) : resolve(res as ServingStatus)),
      );
    });
    const detail = await new Promise<grpc.ServiceError>((resolve) => {
      const get = Buffer.from(toBinary(GetInvoiceRequestSchema, create(GetInvoiceRequestSchema, { projectId: 'p', invoiceId: 'missing' })));
      plain.makeUnaryRequest('/coinvoice.invoice.v1.InvoiceService/GetInvoice', (m: Buffer) => m, (b: Buffer) => b, get, (err) => resolve(err as grpc.ServiceError));
    });
    plain.close();
    expect(status).toBe(ServingStatus.SERVING);
    expect(detail.code).toBe(grpc.status.NOT_FOUND);
    expect(detail.metadata.get('grpc-status-details-bin')).toHaveLength(1);
  });
});

describe('transport failures', () => {
  test('a write whose connection is reset mid-call is deadline_exceeded (504: it may have taken effect), never a 503 "retry", never a conflict, and never echoes the socket error', async () => {
    const behaviour = new Behaviour();
    const server = await serve(behaviour);
    const proxy = await new TcpProxy(server.port).start();
    behaviour.onPay = never;
    try {
      const client = createRpcClient(InvoiceService, proxy.url);
      const call = rejection(client.payInvoice({ projectId: 'p', invoiceId: 'inv-1' }));
      while (behaviour.payCalls === 0) await sleep(5);
      proxy.cut();
      const err = await call;
      // The service had the call (payCalls is 1): it may have committed before the cut. A 503 says
      // "it never happened, retry"; a client without an idempotency key would then pay twice.
      expect(err.code).toBe(Code.DeadlineExceeded);
      expect(err.rawMessage).toBe('the connection to the service was lost mid-call; the call may have taken effect');
      expect(httpStatusOf(err.code, errorFacts(err).code)).toBe(504);
      expect(err.message).not.toMatch(/ECONNRESET|socket|RST_STREAM|read /i);
      // A write is never repeated on its own: the caller decides, with its idempotency key.
      await sleep(200);
      expect(behaviour.payCalls).toBe(1);
    } finally {
      await proxy.stop();
      await server.close(100);
    }
  });

  test('a read cut mid-call is retried once on a fresh connection and succeeds', async () => {
    const behaviour = new Behaviour();
    const server = await serve(behaviour);
    const proxy = await new TcpProxy(server.port).start();
    let first = true;
    behaviour.onGet = async () => {
      if (first) {
        first = false;
        await never();
      }
    };
    try {
      const client = createRpcClient(InvoiceService, proxy.url);
      const call = client.getInvoice({ projectId: 'p', invoiceId: 'inv-7' });
      while (behaviour.getCalls === 0) await sleep(5);
      proxy.cut();
      const res = await call;
      expect(res.invoice?.id).toBe('inv-7');
      expect(behaviour.getCalls).toBe(2);
      expect(proxy.connections).toBe(2);
    } finally {
      await proxy.stop();
      await server.close(100);
    }
  });

  test('a read that fails on the fresh connection too is unavailable (one retry, not a loop)', async () => {
    const behaviour = new Behaviour();
    const server = await serve(behaviour);
    const proxy = await new TcpProxy(server.port).start();
    behaviour.onGet = never;
    try {
      const client = createRpcClient(InvoiceService, proxy.url, { timeoutMs: 3_000 });
      const call = rejection(client.getInvoice({ projectId: 'p', invoiceId: 'inv-8' }));
      while (behaviour.getCalls === 0) await sleep(5);
      proxy.cut();
      while (behaviour.getCalls < 2) await sleep(5);
      proxy.cut();
      const err = await call;
      expect(err.code).toBe(Code.Unavailable);
      expect(behaviour.getCalls).toBe(2);
    } finally {
      await proxy.stop();
      await server.close(100);
    }
  });

  test('a write to a host whose name does not resolve is unavailable (503): it never left (a second review saw 504 "may have taken effect")', async () => {
    const client = createRpcClient(InvoiceService, 'http://no-such-host.invalid:50051', { timeoutMs: 2_000 });
    const err = await rejection(client.payInvoice({ projectId: 'p', invoiceId: 'b' }));
    expect(err.code).toBe(Code.Unavailable);
  });

  test('nobody listening is unavailable (503), for a write too (it never reached the service); a server that restarts on the same port is found again', async () => {
    const behaviour = new Behaviour();
    const server = await serve(behaviour);
    const port = server.port;
    const client = createRpcClient(InvoiceService, server.url, { timeoutMs: 2_000 });
    await client.getInvoice({ projectId: 'p', invoiceId: 'a' });
    await server.close(100);
    const refused = await rejection(client.payInvoice({ projectId: 'p', invoiceId: 'b' }));
    expect(refused.code).toBe(Code.Unavailable);
    expect(refused.message).not.toMatch(/ECONNREFUSED|connect /);
    const again = await serve(behaviour, { port });
    try {
      const started = Date.now();
      await client.getInvoice({ projectId: 'p', invoiceId: 'c' });
      expect(Date.now() - started).toBeLessThan(1_500);
    } finally {
      await again.close(100);
    }
  });

  test('a handler slower than the deadline is deadline_exceeded (504)', async () => {
    const behaviour = new Behaviour();
    const server = await serve(behaviour);
    behaviour.onPay = () => sleep(1_000);
    try {
      const client = createRpcClient(InvoiceService, server.url, { timeoutMs: 200 });
      const err = await rejection(client.payInvoice({ projectId: 'p', invoiceId: 'slow' }));
      expect(err.code).toBe(Code.DeadlineExceeded);
      expect(httpStatusOf(err.code)).toBe(504);
    } finally {
      await server.close(100);
    }
  });

  test('close sends GOAWAY: a call in flight finishes, the server stops once it has', async () => {
    const behaviour = new Behaviour();
    const server = await serve(behaviour);
    let release!: () => void;
    behaviour.onPay = () => new Promise<void>((r) => (release = r));
    const client = createRpcClient(InvoiceService, server.url);
    const inFlight = client.payInvoice({ projectId: 'p', invoiceId: 'in-flight' });
    while (behaviour.payCalls === 0) await sleep(5);
    let closed = false;
    const closing = server.close(5_000).then(() => (closed = true));
    await sleep(100);
    expect(closed).toBe(false);
    release();
    expect((await inFlight).invoice?.id).toBe('in-flight');
    await closing;
    expect(closed).toBe(true);
  });
});

describe('mutual TLS', () => {
  let ca: TestCertificateAuthority;
  let server: RpcServer;
  const behaviour = new Behaviour();
  const tlsOf = (name: string): RpcTls => {
    const issued = ca.issue(name);
    return { ca: ca.ca, cert: issued.cert, key: issued.key };
  };
  const seenCallers: string[][] = [];

  beforeAll(async () => {
    ca = new TestCertificateAuthority();
    // The gateway may read invoices; only the invoice service itself may pay them here.
    const policy: CallerPolicy = (procedure, caller) => {
      seenCallers.push([...caller.names]);
      if (procedure.endsWith('/GetInvoice')) return caller.names.includes('gateway');
      return caller.names.includes('invoice');
    };
    server = await serve(behaviour, { tls: tlsOf('invoice'), authorize: policy, healthPort: 0 });
  });
  afterAll(async () => {
    await server.close(100);
    ca.remove();
  });

  test('a caller with a certificate from the CA is identified by its subjectAltName and checked per RPC', async () => {
    const gateway = createRpcClient(InvoiceService, server.url, { tls: tlsOf('gateway') });
    expect((await gateway.getInvoice({ projectId: 'p', invoiceId: 'i' })).invoice?.id).toBe('i');
    expect(seenCallers.at(-1)).toEqual(['gateway']);
    const denied = await rejection(gateway.payInvoice({ projectId: 'p', invoiceId: 'i' }));
    expect(denied.code).toBe(Code.PermissionDenied);
    expect(errorFacts(denied).code).toBe('caller_not_allowed');
  });

  test('a caller without a client certificate is refused before any handler runs', async () => {
    const before = behaviour.getCalls;
    const target = new URL(server.url).host;
    const noCert = new grpc.Client(target, grpc.credentials.createSsl(ca.ca));
    const err = await new Promise<grpc.ServiceError>((resolve) => {
      noCert.makeUnaryRequest('/coinvoice.invoice.v1.InvoiceService/GetInvoice', (m: Buffer) => m, (b: Buffer) => b, Buffer.from([]), { deadline: Date.now() + 3_000 }, (e) => resolve(e as grpc.ServiceError));
    });
    noCert.close();
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(behaviour.getCalls).toBe(before);
  });

  test('a certificate from another CA is refused', async () => {
    const other = new TestCertificateAuthority('rogue CA');
    try {
      const issued = other.issue('gateway');
      const rogue = createRpcClient(InvoiceService, server.url, { tls: { ca: ca.ca, cert: issued.cert, key: issued.key }, timeoutMs: 3_000 });
      const err = await rejection(rogue.getInvoice({ projectId: 'p', invoiceId: 'i' }));
      expect(err.code).toBe(Code.Unavailable);
    } finally {
      other.remove();
    }
  });

  test('Kubernetes probes (no certificate) get health on the plaintext health port, and nothing else', async () => {
    const probe = createRpcClient(Health, `http://127.0.0.1:${server.healthPort}`);
    expect((await probe.check({ service: 'readiness' })).status).toBe(ServingStatus.SERVING);
    const sneaky = createRpcClient(InvoiceService, `http://127.0.0.1:${server.healthPort}`);
    const err = await rejection(sneaky.getInvoice({ projectId: 'p', invoiceId: 'i' }));
    expect(err.code).toBe(Code.Unimplemented);
  });

  test('health answers any caller with a valid certificate, whatever the policy says', async () => {
    const stranger = createRpcClient(Health, server.url, { tls: tlsOf('stranger') });
    const res = await stranger.check(create(HealthCheckRequestSchema, { service: '' }));
    expect(res.status).toBe(ServingStatus.SERVING);
  });
});
