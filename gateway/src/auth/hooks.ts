/**
 * Fastify onRequest hooks that establish `request.principal`, one per authentication scheme.
 * onRequest runs before the body is parsed and validated: a caller without valid credentials
 * learns that first (401), not how its body would have been judged.
 */
import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { HttpProblem } from '../problem';
import { API_KEY_HEADER, type ApiKeyVerifier } from './api-keys';
import type { ApiKeyPrincipal, MerchantPrincipal } from './principal';
import type { SessionVerifier } from './sessions';
import type { GatewayRateLimits } from '../rate-limits';

export interface Authenticators {
  apiKeys: ApiKeyVerifier;
  sessions: SessionVerifier;
  /** Calls per API key are counted once the key is known. */
  rateLimits: GatewayRateLimits;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function authHooks({ apiKeys, sessions, rateLimits }: Authenticators) {
  const verifyApiKey = async (request: FastifyRequest) => {
    // Only a key auth must be asked about, and does not know, counts (a cached key costs nothing; a
    // malformed one is refused before).
    const principal = await apiKeys.verify(header(request, API_KEY_HEADER), (lookUp) => rateLimits.apiKeyLookup(request.ip, lookUp));
    await rateLimits.apiKey(principal.keyId);
    return principal;
  };
  const apiKey: onRequestAsyncHookHandler = async (request) => {
    request.principal = await verifyApiKey(request);
  };
  const merchant: onRequestAsyncHookHandler = async (request) => {
    request.principal = await sessions.verify(header(request, 'authorization'));
  };
  /** Payout routes take either; an API key wins when both are sent (it names the project). */
  const apiKeyOrMerchant: onRequestAsyncHookHandler = async (request) => {
    if (header(request, API_KEY_HEADER) !== undefined) request.principal = await verifyApiKey(request);
    else if (header(request, 'authorization') !== undefined) request.principal = await sessions.verify(header(request, 'authorization'));
    else throw new HttpProblem(401, 'unauthenticated', 'send an x-api-key header or an Authorization: Bearer token');
  };
  const admin: onRequestAsyncHookHandler = async (request, reply: FastifyReply) => {
    await merchant.call(reply.server, request, reply);
    if (request.principal?.kind !== 'merchant' || !request.principal.admin) {
      throw new HttpProblem(403, 'forbidden', 'this operation is for operators');
    }
  };
  return { apiKey, merchant, apiKeyOrMerchant, admin };
}

export function apiKeyPrincipal(request: FastifyRequest): ApiKeyPrincipal {
  if (request.principal?.kind !== 'api_key') throw new Error('route requires x-api-key authentication but no hook set it');
  return request.principal;
}

export function merchantPrincipal(request: FastifyRequest): MerchantPrincipal {
  if (request.principal?.kind !== 'merchant') throw new Error('route requires bearer authentication but no hook set it');
  return request.principal;
}
