/**
 * Mutual TLS between services: every process holds a certificate issued by the internal CA and
 * names itself in its subjectAltName (e.g. `DNS:gateway`); servers require a client certificate
 * and learn who calls from it, clients check the server's certificate against the same CA.
 */
import { readFileSync } from 'node:fs';

export interface RpcTls {
  /** PEM of the CA that issued every internal certificate. */
  ca: Buffer;
  /** PEM certificate and key of this process. */
  cert: Buffer;
  key: Buffer;
}

export interface RpcTlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
}

export function readRpcTls(files: RpcTlsFiles): RpcTls {
  return { ca: readFileSync(files.caFile), cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) };
}

/** Who made a call: the names in the client certificate's subjectAltName; none without mTLS. */
export interface CallerIdentity {
  names: readonly string[];
}

export const ANONYMOUS_CALLER: CallerIdentity = { names: [] };

/** `DNS:gateway, URI:spiffe://coinvoice/gateway` → ['gateway', 'spiffe://coinvoice/gateway']. */
export function namesOfSubjectAltName(subjectAltName: string | undefined): string[] {
  if (!subjectAltName) return [];
  return subjectAltName
    .split(',')
    .map((entry) => entry.trim())
    .map((entry) => /^(?:DNS|URI):(.+)$/.exec(entry)?.[1])
    .filter((name): name is string => Boolean(name));
}
