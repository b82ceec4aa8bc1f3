/**
 * Answers that carry a credential (a session token, a webhook secret, an API key) are never stored
 * by a browser or a proxy on the way (RFC 9111 `no-store`), whatever the status.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';

export async function noStore<T>(_req: FastifyRequest, reply: FastifyReply, payload: T): Promise<T> {
  reply.header('cache-control', 'no-store');
  return payload;
}
