/**
 * How one process calls another: @grpc/grpc-js underneath a Connect `Transport`, so callers keep
 * `Client<typeof X>` and ConnectErrors. The current request id travels in metadata.
 *
 * Failures that are not a service's own answer — reset, refused, GOAWAY, a process killed
 * mid-call — become `unavailable` (or `deadline_exceeded`), never anything a caller could take as
 * a final verdict (409), and never with the socket's error text. Reads (`Get*`, `List*`, health)
 * are retried once on a fresh connection; writes never are (callers use idempotency keys).
 *
 * Methods a client names as `batched` travel together: the calls made in one turn of the event
 * loop go as one coinvoice.rpc.v1.BatchService/Call (docs/performance.md#batched-calls), each
 * answered on its own; a call alone in its turn goes as itself.
 */
import {
  create,
  isMessage,
  type DescMessage,
  type DescMethod,
  type DescMethodStreaming,
  type DescMethodUnary,
  type DescService,
  type MessageInitShape,
  type MessageShape,
} from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import {
  Code,
  ConnectError,
  createClient,
  type Client,
  type ContextValues,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from '@connectrpc/connect';
import { BatchService, CallRequestSchema, type CallResponse } from '../gen/coinvoice/rpc/v1/batch_pb';
import { currentRequestId, REQUEST_ID_HEADER } from '../log';
import { decodeBinary, encodeBinary } from '../protobuf-binary';
import { decodeStatusDetails, STATUS_DETAILS_KEY } from './status-details';
import type { RpcTls } from './tls';

type HeadersInit = ConstructorParameters<typeof Headers>[0];

export interface RpcClientOptions {
  /** Default deadline of a call, when the caller gives none. */
  timeoutMs?: number;
  /** Mutual TLS (the URL must be https://): this process's certificate and the CA to trust. */
  tls?: RpcTls;
  /**
   * Unary methods whose concurrent calls are sent together in batches: the ones a process makes
   * per request of its own, with small answers (a batch's answer must stay under gRPC's 4 MB).
   */
  batched?: readonly DescMethod[];
}

const DEFAULT_TIMEOUT_MS = 5_000;
const RECONNECT_WAIT_MS = 1_000;

/**
 * Keep-alive finds a dead peer within ~25 s even when idle; reconnects start fast and stay
 * bounded so a restarted service is found again within about a second.
 */
const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.keepalive_time_ms': 20_000,
  'grpc.keepalive_timeout_ms': 5_000,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.min_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1_000,
  // Retries are decided here, per method, not by grpc-js' transparent retry policy.
  'grpc.enable_retries': 0,
};

const READ_METHOD = /^(Get|List|Check|Watch)/;

/** A read may be repeated without effect: the one kind of call retried after a transport failure. */
export function isReadMethod(method: DescMethod): boolean {
  return method.idempotency === 1 /* NO_SIDE_EFFECTS */ || READ_METHOD.test(method.name);
}

interface MethodCodec {
  path: string;
  /** The path without its leading slash: how a batched call names its method. */
  procedure: string;
  serialize: (message: MessageShape<DescMessage>) => Buffer;
  deserialize: (bytes: Uint8Array) => MessageShape<DescMessage>;
  read: boolean;
}

const codecs = new WeakMap<DescMethod, MethodCodec>();

function codecOf(method: DescMethod): MethodCodec {
  let codec = codecs.get(method);
  if (!codec) {
    codec = {
      path: `/${method.parent.typeName}/${method.name}`,
      procedure: `${method.parent.typeName}/${method.name}`,
      serialize: (message) => {
        const bytes = encodeBinary(method.input, message);
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      },
      deserialize: (bytes) => decodeBinary(method.output, bytes),
      read: isReadMethod(method),
    };
    codecs.set(method, codec);
  }
  return codec;
}

/**
 * The ConnectError for a failed call. A status with `grpc-status-details-bin` is a service's own
 * answer and keeps its code and details; anything else happened on the way (reset, refused,
 * GOAWAY, RST_STREAM), with our words rather than the socket's: `unavailable` when the call never
 * reached the service, and for a write (`write`) that may have reached it — the connection lost
 * mid-call, the process killed after its commit — `deadline_exceeded`, whose meaning is "it may
 * have taken effect" (docs/architecture.md#transport-errors): a 503 told a client to retry a
 * payout that existed.
 */
export function connectErrorOf(err: grpc.ServiceError, callerAborted: boolean, write = false): ConnectError {
  const details = err.metadata?.get(STATUS_DETAILS_KEY)[0];
  if (details instanceof Buffer) {
    const answer = decodeStatusDetails(details, err.details);
    if (answer) return answer;
  }
  switch (err.code) {
    case grpc.status.DEADLINE_EXCEEDED:
      return new ConnectError('the service did not answer in time', Code.DeadlineExceeded);
    case grpc.status.CANCELLED:
      if (callerAborted) return new ConnectError('the call was cancelled', Code.Canceled);
      return lostOnTheWay(err, write);
    case grpc.status.UNAVAILABLE:
    case grpc.status.INTERNAL:
    case grpc.status.UNKNOWN:
      return lostOnTheWay(err, write);
    default:
      // A status some other gRPC server (or grpc-js itself) produced, e.g. UNIMPLEMENTED.
      return new ConnectError(err.details || grpc.status[err.code] || 'rpc failed', err.code as number as Code);
  }
}

function lostOnTheWay(err: grpc.ServiceError, write: boolean): ConnectError {
  if (write && lostMidCall(err)) return new ConnectError('the connection to the service was lost mid-call; the call may have taken effect', Code.DeadlineExceeded);
  return new ConnectError('the service could not be reached', Code.Unavailable);
}

/**
 * Whether the call's connection went while it was out, so the service may have run it: grpc-js's
 * own statuses for a lost stream (a connection dropped or reset, a RST_STREAM, a cancel it did not
 * ask for). Not a call that found no connection, a name that did not resolve, a stream the server
 * refused (RFC 9113 §8.7: not processed) or an UNAVAILABLE the server answered itself: those never
 * ran. These are grpc-js's words (1.14); services/runtime/test/rpc.test.ts fails if they change.
 */
function lostMidCall(err: grpc.ServiceError): boolean {
  if (err.code === grpc.status.CANCELLED || err.code === grpc.status.INTERNAL || err.code === grpc.status.UNKNOWN) return true;
  return err.code === grpc.status.UNAVAILABLE && /Connection dropped|RST_STREAM|ECONNRESET|ETIMEDOUT|EPIPE|GOAWAY|socket hang up/i.test(err.details);
}

/** Transport failures worth a second try on a fresh connection (reads only). */
function isTransportFailure(err: grpc.ServiceError): boolean {
  if (err.metadata?.get(STATUS_DETAILS_KEY).length) return false;
  return err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.INTERNAL || err.code === grpc.status.UNKNOWN || err.code === grpc.status.CANCELLED;
}

/** A call's metadata: its headers, and the request id (the caller's current one, or a queued call's). */
function metadataOf(header: HeadersInit | undefined, requestId: string | undefined): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (header) new Headers(header).forEach((value, key) => metadata.set(key, value));
  if (requestId && metadata.get(REQUEST_ID_HEADER).length === 0) metadata.set(REQUEST_ID_HEADER, requestId);
  return metadata;
}

function inputOf(method: DescMethod, input: MessageInitShape<DescMessage>): MessageShape<DescMessage> {
  return isMessage(input, method.input) ? input : create(method.input, input);
}

const NO_HEADERS = new Headers();

/** The target grpc-js dials: `http://host:port` (plaintext) or `https://host:port` (TLS). */
function targetOf(baseUrl: string): { target: string; secure: boolean } {
  const url = new URL(baseUrl);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`rpc address must be http(s)://host:port, got ${baseUrl}`);
  return { target: url.host, secure: url.protocol === 'https:' };
}

/** The most calls one batch carries (the server accepts up to 256). */
export const MAX_BATCH_CALLS = 64;

/** After a server answered that it serves no batches (an older build), calls go alone for this long. */
const BATCHING_PAUSE_MS = 60_000;

const BATCH_CODEC = codecOf(BatchService.method.call);

/** A batched call waiting for its turn's batch to be sent. */
interface Queued {
  codec: MethodCodec;
  request: MessageShape<DescMessage>;
  requestId: string | undefined;
  signal: AbortSignal | undefined;
  resolve: (message: MessageShape<DescMessage>) => void;
  reject: (error: ConnectError) => void;
}

export function createRpcTransport(baseUrl: string, options: RpcClientOptions = {}): Transport {
  const { target, secure } = targetOf(baseUrl);
  if (secure && !options.tls) throw new Error(`rpc address ${baseUrl} is https but no TLS settings were given`);
  const credentials = secure && options.tls
    ? grpc.credentials.createSsl(options.tls.ca, options.tls.key, options.tls.cert)
    : grpc.credentials.createInsecure();
  const channel = new grpc.Client(target, credentials, CHANNEL_OPTIONS);
  const defaultTimeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const batchedMethods = new Set(options.batched ?? []);

  function unaryOnce(codec: MethodCodec, request: MessageShape<DescMessage>, metadata: grpc.Metadata, deadline: number, signal: AbortSignal | undefined) {
    return new Promise<MessageShape<DescMessage>>((resolve, reject) => {
      const call = channel.makeUnaryRequest(codec.path, codec.serialize, codec.deserialize, request, metadata, { deadline }, (err, response) => {
        signal?.removeEventListener('abort', cancel);
        if (err) reject(err);
        else resolve(response as MessageShape<DescMessage>);
      });
      function cancel() {
        call.cancel();
      }
      signal?.addEventListener('abort', cancel, { once: true });
    });
  }

  /**
   * Resolves once the channel has a working connection again, or after a second at most (a
   * restarted process is back by then; a peer that refuses every handshake is not worth the
   * whole deadline): the retry then fails fast as unavailable.
   */
  function connected(deadline: number): Promise<void> {
    const wait = Math.min(deadline, Date.now() + RECONNECT_WAIT_MS);
    return new Promise<void>((resolve) => channel.waitForReady(wait, () => resolve()));
  }

  /** After a first attempt failed with `err`: a read that met a transport failure is tried once more. */
  async function retried(codec: MethodCodec, request: MessageShape<DescMessage>, metadata: grpc.Metadata, deadline: number, signal: AbortSignal | undefined, err: grpc.ServiceError) {
    const retry = codec.read && isTransportFailure(err) && !signal?.aborted && Date.now() < deadline;
    if (!retry) throw connectErrorOf(err, Boolean(signal?.aborted), !codec.read);
    try {
      // Wait for a connection that works (the old one is gone) rather than failing fast again.
      await connected(deadline);
      return await unaryOnce(codec, request, metadata, deadline, signal);
    } catch (second) {
      throw connectErrorOf(second as grpc.ServiceError, Boolean(signal?.aborted));
    }
  }

  async function callAlone(codec: MethodCodec, request: MessageShape<DescMessage>, metadata: grpc.Metadata, deadline: number, signal: AbortSignal | undefined) {
    try {
      return await unaryOnce(codec, request, metadata, deadline, signal);
    } catch (first) {
      return retried(codec, request, metadata, deadline, signal, first as grpc.ServiceError);
    }
  }

  // Batched calls queue per deadline length, so a batch's deadline is each of its calls' own.
  const queues = new Map<number, Queued[]>();
  let flushScheduled = false;
  let batchingPausedUntil = 0;

  function enqueue(timeoutMs: number, item: Queued): void {
    let queue = queues.get(timeoutMs);
    if (!queue) queues.set(timeoutMs, (queue = []));
    queue.push(item);
    if (queue.length >= MAX_BATCH_CALLS) {
      queues.delete(timeoutMs);
      send(queue, timeoutMs);
    } else if (!flushScheduled) {
      flushScheduled = true;
      // After this turn's I/O callbacks: every request read in it has made its call by then.
      setImmediate(flush);
    }
  }

  function flush(): void {
    flushScheduled = false;
    const ready = [...queues];
    queues.clear();
    for (const [timeoutMs, queue] of ready) send(queue, timeoutMs);
  }

  function settle(item: Queued, outcome: Promise<MessageShape<DescMessage>>): void {
    // callAlone and retried fail with ConnectErrors only.
    outcome.then(item.resolve, (err: unknown) => item.reject(ConnectError.from(err)));
  }

  function send(queue: Queued[], timeoutMs: number): void {
    const deadline = Date.now() + timeoutMs;
    const live = queue.filter((item) => !item.signal?.aborted);
    for (const item of queue) if (item.signal?.aborted) item.reject(new ConnectError('the call was cancelled', Code.Canceled));
    if (live.length === 0) return;
    if (live.length === 1 || Date.now() < batchingPausedUntil) {
      for (const item of live) settle(item, callAlone(item.codec, item.request, metadataOf(undefined, item.requestId), deadline, item.signal));
      return;
    }
    const envelope = create(CallRequestSchema, {
      calls: live.map((item) => ({ procedure: item.codec.procedure, request: item.codec.serialize(item.request), requestId: item.requestId ?? '' })),
    });
    // A caller that gives up is answered at once; its call inside the batch runs on (as a unary
    // call's would if the server had already started it).
    for (const item of live) item.signal?.addEventListener('abort', () => item.reject(new ConnectError('the call was cancelled', Code.Canceled)), { once: true });
    unaryOnce(BATCH_CODEC, envelope, new grpc.Metadata(), deadline, undefined).then(
      (answer) => {
        const { results } = answer as CallResponse;
        live.forEach((item, i) => {
          const result = results[i]?.result;
          if (result?.case === 'response') item.resolve(item.codec.deserialize(result.value));
          else if (result?.case === 'status') item.reject(decodeStatusDetails(result.value, 'rpc failed') ?? new ConnectError('rpc failed', Code.Unknown));
          else item.reject(new ConnectError('the service answered a batch without this call', Code.Internal));
        });
      },
      (err: grpc.ServiceError) => {
        if (err.code === grpc.status.UNIMPLEMENTED && !err.metadata?.get(STATUS_DETAILS_KEY).length) {
          // A server without the batch service: nothing ran; every call goes again, alone.
          batchingPausedUntil = Date.now() + BATCHING_PAUSE_MS;
          for (const item of live) settle(item, callAlone(item.codec, item.request, metadataOf(undefined, item.requestId), deadline, item.signal));
          return;
        }
        for (const item of live) settle(item, retried(item.codec, item.request, metadataOf(undefined, item.requestId), deadline, item.signal, err));
      },
    );
  }

  return {
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: MessageInitShape<I>,
      _contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      if (signal?.aborted) throw new ConnectError('the call was cancelled', Code.Canceled);
      const codec = codecOf(method);
      const request = inputOf(method, input as MessageInitShape<DescMessage>);
      let message: MessageShape<DescMessage>;
      if (header === undefined && batchedMethods.has(method)) {
        // Headers beyond the request id do not travel in a batch: a call that sets some goes alone.
        const requestId = currentRequestId();
        message = await new Promise((resolve, reject) => enqueue(timeoutMs ?? defaultTimeoutMs, { codec, request, requestId, signal, resolve, reject }));
      } else {
        message = await callAlone(codec, request, metadataOf(header, currentRequestId()), Date.now() + (timeoutMs ?? defaultTimeoutMs), signal);
      }
      return {
        stream: false,
        service: method.parent as DescService,
        method,
        header: NO_HEADERS,
        message: message as MessageShape<O>,
        trailer: NO_HEADERS,
      };
    },

    async stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: AsyncIterable<MessageInitShape<I>>,
      _contextValues?: ContextValues,
    ): Promise<StreamResponse<I, O>> {
      if (method.methodKind !== 'server_streaming') {
        throw new ConnectError(`${method.methodKind} calls are not supported`, Code.Unimplemented);
      }
      const codec = codecOf(method);
      let request: MessageShape<DescMessage> | undefined;
      for await (const first of input) {
        request = inputOf(method, first as MessageInitShape<DescMessage>);
        break;
      }
      if (!request) throw new ConnectError('a server-streaming call needs one request', Code.InvalidArgument);
      const options: grpc.CallOptions = timeoutMs !== undefined ? { deadline: Date.now() + timeoutMs } : {};
      const call = channel.makeServerStreamRequest(codec.path, codec.serialize, codec.deserialize, request, metadataOf(header, currentRequestId()), options);
      signal?.addEventListener('abort', () => call.cancel(), { once: true });
      async function* messages(): AsyncIterable<MessageShape<O>> {
        try {
          for await (const message of call) yield message as MessageShape<O>;
        } catch (err) {
          throw connectErrorOf(err as grpc.ServiceError, Boolean(signal?.aborted));
        }
      }
      return { stream: true, service: method.parent as DescService, method, header: NO_HEADERS, message: messages(), trailer: NO_HEADERS };
    },
  };
}

export function createRpcClient<S extends DescService>(service: S, baseUrl: string, options?: RpcClientOptions): Client<S> {
  return createClient(service, createRpcTransport(baseUrl, options));
}
