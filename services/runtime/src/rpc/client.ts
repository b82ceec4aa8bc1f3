/**
 * How one process calls another: the gRPC protocol over HTTP/2 cleartext, with the current
 * request id forwarded so a request can be followed across services in the logs.
 */
import type { DescService } from '@bufbuild/protobuf';
import { createClient, type Client, type Interceptor, type Transport } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { currentRequestId, REQUEST_ID_HEADER } from '../log';

const forwardRequestId: Interceptor = (next) => (req) => {
  const requestId = currentRequestId();
  if (requestId && !req.header.has(REQUEST_ID_HEADER)) req.header.set(REQUEST_ID_HEADER, requestId);
  return next(req);
};

export function createRpcTransport(baseUrl: string, options: { timeoutMs?: number } = {}): Transport {
  return createGrpcTransport({
    baseUrl,
    interceptors: [forwardRequestId],
    defaultTimeoutMs: options.timeoutMs ?? 5_000,
  });
}

export function createRpcClient<S extends DescService>(service: S, baseUrl: string, options?: { timeoutMs?: number }): Client<S> {
  return createClient(service, createRpcTransport(baseUrl, options));
}
