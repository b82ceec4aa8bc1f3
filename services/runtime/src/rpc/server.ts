/**
 * The gRPC port of a service, served by @grpc/grpc-js (docs/architecture.md#internal-rpc-engine: its per-call cost is a third of
 * connect-node's). Messages are encoded with protobuf-es and handlers stay Connect
 * `ServiceImpl<typeof X>` classes: this file adapts one to the other. Also here: grpc.health.v1,
 * a request id in every log line, RPC metrics, errors that never leak, optional mutual TLS with a
 * per-RPC caller check, a close that sends GOAWAY and lets in-flight calls finish, and the batch
 * service that carries many unary calls in one (docs/performance.md#batched-calls).
 */
import {
  create,
  isMessage,
  type DescMessage,
  type DescMethod,
  type DescService,
  type MessageInitShape,
  type MessageShape,
} from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import { Code, ConnectError, createContextValues, type ContextValues, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { Counter, Histogram, type Registry } from 'prom-client';
import { isDatabaseUnavailableError } from '../db';
import { serviceError } from '../errors';
import { decodeBinary, encodeBinary } from '../protobuf-binary';
import { BatchService, CallResponseSchema, type BatchedResult, type CallRequest } from '../gen/coinvoice/rpc/v1/batch_pb';
import { Health } from '../gen/grpc/health/v1/health_pb';
import { REQUEST_ID_HEADER, sanitizeRequestId, withRequestId, type Logger } from '../log';
import { HealthService, type HealthMonitor } from './health';
import { encodeStatusDetails, STATUS_DETAILS_KEY } from './status-details';
import { ANONYMOUS_CALLER, namesOfSubjectAltName, type CallerIdentity, type RpcTls } from './tls';

/** How a service registers its implementations (the subset of Connect's router it uses). */
export interface RpcRouter {
  service<S extends DescService>(service: S, impl: ServiceImpl<S>): void;
}

/** Decides whether a caller may invoke a procedure (`coinvoice.payout.v1.PayoutService/CompletePayout`). */
export type CallerPolicy = (procedure: string, caller: CallerIdentity) => boolean;

export interface RpcServerOptions {
  port: number;
  host?: string;
  /** Registers the service's own RPC implementations. */
  routes: (router: RpcRouter) => void;
  health: HealthMonitor;
  logger: Logger;
  metrics: Registry;
  /** Serve TLS and require a client certificate from the same CA. */
  tls?: RpcTls;
  /** Checked before every call except health; without it every caller may call everything. */
  authorize?: CallerPolicy;
  /**
   * With TLS: a second, plaintext port serving grpc.health.v1 only, because Kubernetes `grpc:`
   * probes cannot present a client certificate. Health reveals nothing but SERVING or not.
   */
  healthPort?: number;
}

export interface RpcServer {
  port: number;
  url: string;
  /** The plaintext health-only port, when one was asked for. */
  healthPort?: number;
  /** Stops accepting (GOAWAY), lets open calls finish for up to graceMs, then cuts what is left. */
  close(graceMs: number): Promise<void>;
}

/** Clients ping every 20 s; connections are recycled every 5 min so new replicas get traffic. */
const SERVER_OPTIONS: grpc.ServerOptions = {
  'grpc.keepalive_time_ms': 30_000,
  'grpc.keepalive_timeout_ms': 10_000,
  'grpc.max_connection_age_ms': 300_000,
  'grpc.max_connection_age_grace_ms': 30_000,
};

/** The metrics of every call, with their labelled children looked up once per procedure and code. */
class Instruments {
  private readonly handled: Counter<'procedure' | 'code'>;
  private readonly duration: Histogram<'procedure'>;
  private readonly handledChildren = new Map<string, Counter.Internal>();
  private readonly durationChildren = new Map<string, Histogram.Internal<'procedure'>>();

  constructor(registry: Registry) {
    this.handled = new Counter({
      name: 'rpc_server_handled_total',
      help: 'RPCs completed, by procedure and gRPC code',
      labelNames: ['procedure', 'code'] as const,
      registers: [registry],
    });
    this.duration = new Histogram({
      name: 'rpc_server_handling_seconds',
      help: 'RPC handling time',
      labelNames: ['procedure'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    });
  }

  record(procedure: string, code: string, seconds: number): void {
    const key = `${procedure} ${code}`;
    let handled = this.handledChildren.get(key);
    if (!handled) this.handledChildren.set(key, (handled = this.handled.labels(procedure, code)));
    let duration = this.durationChildren.get(procedure);
    if (!duration) this.durationChildren.set(procedure, (duration = this.duration.labels(procedure)));
    handled.inc();
    duration.observe(seconds);
  }
}

/**
 * The ConnectError a failed handler answers with. A service's own errors pass through. Postgres
 * being unreachable is expected in an outage: `unavailable` (503 at the gateway), so clients retry.
 * Anything else is logged with its stack and answered as a bare `internal`, never leaked.
 */
function answerOf(err: unknown, procedure: string, logger: Logger): ConnectError {
  if (err instanceof ConnectError) {
    if (err.code === Code.Internal || err.code === Code.Unknown) logger.error({ err, procedure }, 'rpc failed');
    return err;
  }
  if (isDatabaseUnavailableError(err)) {
    logger.warn({ procedure, reason: err instanceof Error ? err.message : String(err) }, 'rpc failed: postgres unavailable');
    return serviceError(Code.Unavailable, 'service_unavailable', 'the database is unavailable; try again shortly');
  }
  logger.error({ err, procedure }, 'rpc failed with an unexpected error');
  return new ConnectError('internal error', Code.Internal);
}

/**
 * The gRPC status of an answer. Every error our servers send carries `grpc-status-details-bin`:
 * that is how a client tells a service's deliberate error from a transport failure.
 */
function statusOf(error: ConnectError): Partial<grpc.StatusObject> {
  const metadata = new grpc.Metadata();
  const details = encodeStatusDetails(error);
  metadata.set(STATUS_DETAILS_KEY, Buffer.from(details.buffer, details.byteOffset, details.byteLength));
  return { code: error.code as number as grpc.status, details: error.rawMessage, metadata };
}

function serializerOf(schema: DescMessage): (message: MessageShape<DescMessage>) => Buffer {
  return (message) => {
    const bytes = encodeBinary(schema, message);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializerOf(schema: DescMessage): (bytes: Buffer) => MessageShape<DescMessage> {
  return (bytes) => decodeBinary(schema, bytes);
}

function messageOf(schema: DescMessage, value: MessageInitShape<DescMessage>): MessageShape<DescMessage> {
  return isMessage(value, schema) ? value : create(schema, value);
}

type AnyServerCall = grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>;

function callerOf(call: AnyServerCall): CallerIdentity {
  const peer = call.getAuthContext().sslPeerCertificate;
  return peer ? { names: namesOfSubjectAltName(peer.subjectaltname) } : ANONYMOUS_CALLER;
}

/**
 * Connect's HandlerContext over a grpc-js call. Built lazily: most handlers never look at it, and
 * headers, signals and context values cost allocations on every call.
 */
class GrpcHandlerContext implements HandlerContext {
  readonly protocolName = 'grpc';
  readonly requestMethod = 'POST';
  private controller: AbortController | undefined;
  private headers: Headers | undefined;
  private contextValues: ContextValues | undefined;
  // Response metadata is not sent: no handler sets any, and gRPC trailers carry the status only.
  readonly responseHeader = EMPTY_HEADERS;
  readonly responseTrailer = EMPTY_HEADERS;

  constructor(
    readonly service: DescService,
    readonly method: DescMethod,
    private readonly call: AnyServerCall,
  ) {}

  get url(): string {
    return `/${this.service.typeName}/${this.method.name}`;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      const controller = new AbortController();
      this.controller = controller;
      if (this.call.cancelled) controller.abort(new ConnectError('the caller went away', Code.Canceled));
      else this.call.once('cancelled', () => controller.abort(new ConnectError('the caller went away', Code.Canceled)));
    }
    return this.controller.signal;
  }

  timeoutMs = (): number | undefined => {
    const deadline = this.call.getDeadline();
    if (deadline === Infinity) return undefined;
    return Number(deadline) - Date.now();
  };

  get requestHeader(): Headers {
    if (!this.headers) {
      const headers = new Headers();
      for (const [key, value] of Object.entries(this.call.metadata.getMap())) {
        if (typeof value === 'string') headers.set(key, value);
      }
      this.headers = headers;
    }
    return this.headers;
  }

  get values(): ContextValues {
    this.contextValues ??= createContextValues();
    return this.contextValues;
  }

  /** The call is over: downstream work tied to the signal stops, as with Connect. */
  done(): void {
    this.controller?.abort(new ConnectError('the call is complete', Code.Canceled));
  }
}

const EMPTY_HEADERS = new Headers();

class Dispatcher {
  constructor(
    private readonly options: RpcServerOptions,
    private readonly instruments: Instruments,
  ) {}

  /**
   * Runs one call: request id, caller check, metrics, error mapping. `requestId` is a batched
   * call's own (its envelope's metadata carries none of the calls' ids).
   */
  run(
    service: DescService,
    method: DescMethod,
    call: AnyServerCall,
    checkCaller: boolean,
    body: (context: GrpcHandlerContext) => Promise<void>,
    fail: (error: ConnectError) => void,
    requestId: string | undefined = call.metadata.get(REQUEST_ID_HEADER)[0] as string | undefined,
  ): void {
    const procedure = `${service.typeName}/${method.name}`;
    withRequestId(sanitizeRequestId(requestId), () => {
      const started = process.hrtime.bigint();
      const context = new GrpcHandlerContext(service, method, call);
      const finish = (code: string) => {
        context.done();
        this.instruments.record(procedure, code, Number(process.hrtime.bigint() - started) / 1e9);
      };
      if (checkCaller && this.options.authorize && !this.options.authorize(procedure, callerOf(call))) {
        const refused = serviceError(Code.PermissionDenied, 'caller_not_allowed', `this caller may not call ${procedure}`);
        finish(Code[refused.code]);
        fail(refused);
        return;
      }
      body(context).then(
        () => finish('ok'),
        (err: unknown) => {
          const answer = answerOf(err, procedure, this.options.logger);
          finish(Code[answer.code] ?? 'unknown');
          fail(answer);
        },
      );
    });
  }
}

type UntypedImpl = Record<string, (request: unknown, context: HandlerContext) => unknown>;

/**
 * One unary method as a batched call runs it: its request decoded from the call's bytes, the
 * answer (or the failure) encoded for the batch's response.
 */
type BatchedMethod = (request: Uint8Array, envelope: grpc.ServerUnaryCall<unknown, unknown>, requestId: string) => Promise<BatchedResult['result']>;

function definitionOf(service: DescService, impl: UntypedImpl, dispatcher: Dispatcher, checkCaller: boolean, batched: Map<string, BatchedMethod>) {
  type Message = MessageShape<DescMessage>;
  const definition: Record<string, grpc.MethodDefinition<Message, Message>> = {};
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const fn = impl[method.localName];
    // As with Connect's router: a method the implementation lacks answers `unimplemented`.
    const handler =
      typeof fn === 'function'
        ? fn.bind(impl)
        : () => {
            throw new ConnectError(`${service.typeName}.${method.name} is not implemented`, Code.Unimplemented);
          };
    const base = {
      path: `/${service.typeName}/${method.name}`,
      requestSerialize: serializerOf(method.input),
      requestDeserialize: deserializerOf(method.input),
      responseSerialize: serializerOf(method.output),
      responseDeserialize: deserializerOf(method.output),
      originalName: method.localName,
    };
    if (method.methodKind === 'unary') {
      definition[method.name] = { ...base, requestStream: false, responseStream: false };
      handlers[method.name] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        dispatcher.run(
          service,
          method,
          call,
          checkCaller,
          async (context) => {
            const output = await handler(call.request, context);
            callback(null, messageOf(method.output, output as MessageInitShape<DescMessage>));
          },
          (error) => callback(statusOf(error)),
        );
      };
      batched.set(`${service.typeName}/${method.name}`, (bytes, envelope, requestId) =>
        new Promise((resolve) => {
          let request: Message;
          try {
            request = decodeBinary(method.input, bytes);
          } catch {
            resolve(failureOf(serviceError(Code.InvalidArgument, 'malformed_request', `the request of ${service.typeName}/${method.name} could not be decoded`)));
            return;
          }
          dispatcher.run(
            service,
            method,
            envelope,
            checkCaller,
            async (context) => {
              const output = await handler(request, context);
              resolve({ case: 'response', value: encodeBinary(method.output, messageOf(method.output, output as MessageInitShape<DescMessage>)) });
            },
            (error) => resolve(failureOf(error)),
            requestId,
          );
        }),
      );
    } else if (method.methodKind === 'server_streaming') {
      definition[method.name] = { ...base, requestStream: false, responseStream: true };
      handlers[method.name] = (call: grpc.ServerWritableStream<unknown, unknown>) => {
        dispatcher.run(
          service,
          method,
          call,
          checkCaller,
          async (context) => {
            const outputs = handler(call.request, context) as AsyncIterable<MessageInitShape<DescMessage>>;
            for await (const output of outputs) {
              if (call.cancelled) break;
              call.write(messageOf(method.output, output));
            }
            call.end();
          },
          (error) => call.emit('error', statusOf(error)),
        );
      };
    } else {
      throw new Error(`${service.typeName}.${method.name}: ${method.methodKind} RPCs are not supported`);
    }
  }
  return { definition, handlers };
}

function failureOf(error: ConnectError): BatchedResult['result'] {
  return { case: 'status', value: encodeStatusDetails(error) };
}

const BATCH_PROCEDURE = `${BatchService.typeName}/${BatchService.method.call.name}`;

/** More calls than any client sends in one batch (MAX_BATCH_CALLS in client.ts is 64). */
const MAX_CALLS_PER_BATCH = 256;

/**
 * coinvoice.rpc.v1.BatchService/Call: every call through the table of this server's own unary
 * methods, concurrently, each with its caller check, request id and metrics; the envelope itself
 * needs no permission (it can only reach what its caller could reach call by call).
 */
function batchServiceOf(batched: Map<string, BatchedMethod>, instruments: Instruments, logger: Logger) {
  const method = BatchService.method.call;
  const definition = {
    call: {
      path: `/${BatchService.typeName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: serializerOf(method.input),
      requestDeserialize: deserializerOf(method.input),
      responseSerialize: serializerOf(method.output),
      responseDeserialize: deserializerOf(method.output),
      originalName: method.localName,
    },
  };
  const handlers: grpc.UntypedServiceImplementation = {
    call: (envelope: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const started = process.hrtime.bigint();
      const record = (code: string) => instruments.record(BATCH_PROCEDURE, code, Number(process.hrtime.bigint() - started) / 1e9);
      const { calls } = envelope.request as CallRequest;
      if (calls.length > MAX_CALLS_PER_BATCH) {
        const refused = serviceError(Code.InvalidArgument, 'batch_too_large', `a batch holds at most ${MAX_CALLS_PER_BATCH} calls`);
        record(Code[refused.code]);
        callback(statusOf(refused));
        return;
      }
      const results = calls.map((c) => {
        const run = batched.get(c.procedure);
        if (run) return run(c.request, envelope, c.requestId);
        return Promise.resolve(failureOf(new ConnectError(`${c.procedure} is not served here`, Code.Unimplemented)));
      });
      Promise.all(results).then(
        (answers) => {
          record('ok');
          callback(null, create(CallResponseSchema, { results: answers.map((result) => ({ result })) }));
        },
        (err: unknown) => {
          record('internal');
          logger.error({ err }, 'batched rpc failed');
          callback(statusOf(new ConnectError('internal error', Code.Internal)));
        },
      );
    },
  };
  return { definition, handlers };
}

export async function startRpcServer(options: RpcServerOptions): Promise<RpcServer> {
  const instruments = new Instruments(options.metrics);
  const dispatcher = new Dispatcher(options, instruments);
  const server = new grpc.Server(SERVER_OPTIONS);
  const batched = new Map<string, BatchedMethod>();
  const add = (service: DescService, impl: UntypedImpl, checkCaller: boolean) => {
    const { definition, handlers } = definitionOf(service, impl, dispatcher, checkCaller, batched);
    server.addService(definition as grpc.ServiceDefinition, handlers);
  };
  // Probes (Kubernetes, load balancers) may ask anyone's health; the caller policy guards the rest.
  add(Health, new HealthService(options.health) as unknown as UntypedImpl, false);
  options.routes({ service: (service, impl) => add(service, impl as unknown as UntypedImpl, true) });
  const batch = batchServiceOf(batched, instruments, options.logger);
  server.addService(batch.definition as grpc.ServiceDefinition, batch.handlers);

  const credentials = options.tls
    ? grpc.ServerCredentials.createSsl(options.tls.ca, [{ private_key: options.tls.key, cert_chain: options.tls.cert }], true)
    : grpc.ServerCredentials.createInsecure();
  const host = options.host ?? '127.0.0.1';
  const port = await bind(server, host, options.port, credentials);
  const servers = [server];
  let healthPort: number | undefined;
  if (options.tls && options.healthPort !== undefined) {
    const healthOnly = new grpc.Server(SERVER_OPTIONS);
    const { definition, handlers } = definitionOf(Health, new HealthService(options.health) as unknown as UntypedImpl, dispatcher, false, new Map());
    healthOnly.addService(definition as grpc.ServiceDefinition, handlers);
    healthPort = await bind(healthOnly, host, options.healthPort, grpc.ServerCredentials.createInsecure());
    servers.push(healthOnly);
  }
  return {
    port,
    healthPort,
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    async close(graceMs) {
      await Promise.all(servers.map((s) => closeGracefully(s, graceMs)));
    },
  };
}

function bind(server: grpc.Server, host: string, port: number, credentials: grpc.ServerCredentials): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    // An IPv6 address goes in brackets: [::1]:50051.
    server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, credentials, (err, bound) => (err ? reject(err) : resolve(bound)));
  });
}

/** GOAWAY: clients finish what they started here and open new streams elsewhere; then cut. */
function closeGracefully(server: grpc.Server, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const force = setTimeout(() => server.forceShutdown(), graceMs);
    force.unref();
    server.tryShutdown(() => {
      clearTimeout(force);
      resolve();
    });
  });
}
