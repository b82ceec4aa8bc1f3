/**
 * Kept-alive connections to webhook receivers (docs/webhook-delivery.md#connections). A new TCP
 * connection per attempt — and a TLS handshake on every https URL — cost both ends more than the
 * request itself; attempts to one receiver now share a few connections.
 *
 * The SSRF guard still decides every attempt: it resolves the URL's host again and pins the
 * addresses it checked (pinnedLookup). Connections are pooled per destination *and* per that
 * vetted address set, so a pooled socket is only ever used by an attempt whose verdict names the
 * very addresses it was opened to; a host that now resolves elsewhere gets a pool of its own (and
 * one resolving to a refused address gets no attempt at all).
 */
import http from 'node:http';
import https from 'node:https';
import type { DestinationVerdict } from '@coinvoice/domain/ssrf';

export interface WebhookConnectionsOptions {
  /** Connections per destination (the worker never has more attempts in flight to one host). */
  maxSocketsPerDestination: number;
  /** An idle connection is closed after this long (below the usual 5 s of receivers' keep-alive). */
  idleMs?: number;
  /** Destinations with a pool; beyond it the least recently used one takes no more attempts and closes once idle. */
  maxDestinations?: number;
}

type Vetted = Extract<DestinationVerdict, { ok: true }>;

export class WebhookConnections {
  /** By destination and vetted addresses, least recently used first. */
  private readonly agents = new Map<string, http.Agent>();
  /** Evicted pools whose sockets have not all closed yet. */
  private readonly retired = new Set<http.Agent>();
  private readonly idleMs: number;
  private readonly maxDestinations: number;

  constructor(private readonly options: WebhookConnectionsOptions) {
    this.idleMs = options.idleMs ?? 4_000;
    this.maxDestinations = options.maxDestinations ?? 1_000;
  }

  /** The pool for an attempt to this verdict's destination, over exactly its vetted addresses. */
  agentFor(verdict: Vetted): http.Agent {
    const key = poolKey(verdict);
    const existing = this.agents.get(key);
    if (existing) {
      // Most recently used last.
      this.agents.delete(key);
      this.agents.set(key, existing);
      return existing;
    }
    const options: http.AgentOptions = {
      keepAlive: true,
      maxSockets: this.options.maxSocketsPerDestination,
      maxFreeSockets: this.options.maxSocketsPerDestination,
      // Applies to idle sockets only: the agent closes a free socket this long unused. An attempt's
      // own time limit is the sender's.
      timeout: this.idleMs,
      scheduling: 'lifo',
    };
    const agent = verdict.url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
    this.agents.set(key, agent);
    while (this.agents.size > this.maxDestinations) {
      const [oldestKey, oldest] = this.agents.entries().next().value as [string, http.Agent];
      this.agents.delete(oldestKey);
      // Not destroyed: an attempt may be in flight on it (churn of address sets must not cut other
      // merchants' attempts). Its idle sockets close after idleMs; `close` still ends it.
      this.retired.add(oldest);
    }
    for (const old of this.retired) if (isIdle(old)) this.retired.delete(old);
    return agent;
  }

  /** Destinations with a pool now (for tests and metrics). */
  get destinations(): number {
    return this.agents.size;
  }

  /** Closes every connection (the worker stopped). */
  close(): void {
    for (const agent of [...this.agents.values(), ...this.retired]) agent.destroy();
    this.agents.clear();
    this.retired.clear();
  }
}

function isIdle(agent: http.Agent): boolean {
  const none = (sockets: NodeJS.ReadOnlyDict<unknown[]>) => Object.values(sockets).every((list) => !list || list.length === 0);
  return none(agent.sockets) && none(agent.freeSockets) && none(agent.requests);
}

function poolKey(verdict: Vetted): string {
  const addresses = verdict.addresses.map((a) => `${a.family}/${a.address}`).sort();
  return `${verdict.url.protocol}//${verdict.hostname}:${verdict.port}|${addresses.join(',')}`;
}
