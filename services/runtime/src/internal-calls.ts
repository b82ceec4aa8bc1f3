/**
 * Who may call what between the processes (docs/architecture.md#internal-calls): mutual TLS settings, required in
 * production and optional in development (`npm start` stays plaintext), and per-RPC caller
 * allow-lists checked against the caller's certificate names (subjectAltName).
 */
import { existsSync } from 'node:fs';
import type { DescService } from '@bufbuild/protobuf';
import { ConfigError, type Setting } from './config';
import type { CallerPolicy } from './rpc/server';
import { readRpcTls, type CallerIdentity, type RpcTls } from './rpc/tls';

/**
 * The names processes carry in their certificates (DNS SAN), and in allow-lists. The payout
 * service's treasury roles have their own (docs/treasury.md): `payout-processor` (`process
 * <network>`, the signer's only caller) and `payout-signer` (`sign`, the signer's server certificate).
 */
export type CallerName = 'gateway' | 'auth' | 'invoice' | 'payout' | 'notifier' | 'payout-processor' | 'payout-signer';

/** A file path (read at start); empty in development means "no TLS". No default in production. */
function fileSetting(what: string): Setting<string> {
  return {
    expected: `the path of a readable ${what} file (PEM)`,
    devDefault: '',
    parse: (raw) => raw.trim(),
  };
}

export const rpcTlsSettings = {
  /** The internal CA that issued every process's certificate. */
  TLS_CA_FILE: fileSetting('CA certificate'),
  /** This process's certificate (its name in subjectAltName) and key. */
  TLS_CERT_FILE: fileSetting('certificate'),
  TLS_KEY_FILE: fileSetting('private key'),
};

/** With TLS: a plaintext port serving grpc.health.v1 only, for Kubernetes probes (0 = none). */
export const grpcHealthPortSetting: Setting<number> = {
  expected: 'a TCP port number from 1 to 65535, or 0 for none',
  default: '0',
  parse: (raw) => (/^\d{1,5}$/.test(raw) && Number(raw) <= 65535 ? Number(raw) : undefined),
};

/** The TLS material when all three files are set (production always), undefined when none is. */
export function rpcTlsOf(config: { TLS_CA_FILE: string; TLS_CERT_FILE: string; TLS_KEY_FILE: string }): RpcTls | undefined {
  const files = { TLS_CA_FILE: config.TLS_CA_FILE, TLS_CERT_FILE: config.TLS_CERT_FILE, TLS_KEY_FILE: config.TLS_KEY_FILE };
  const missing = Object.entries(files).filter(([, value]) => value === '').map(([name]) => name);
  if (missing.length === 3) return undefined;
  if (missing.length > 0) {
    const given = Object.keys(files).filter((name) => !missing.includes(name));
    throw new ConfigError(missing[0]!, `a PEM file path, since ${given.join(' and ')} ${given.length === 1 ? 'is' : 'are'} set (mutual TLS needs all three)`, undefined);
  }
  for (const [name, file] of Object.entries(files)) {
    if (!existsSync(file)) throw new ConfigError(name, `the path of a readable PEM file (${file} does not exist)`, undefined);
  }
  return readRpcTls({ caFile: files.TLS_CA_FILE, certFile: files.TLS_CERT_FILE, keyFile: files.TLS_KEY_FILE });
}

/**
 * Every RPC of `service` with the processes that may call it: a compile error when an RPC is
 * left out, so a new RPC is never callable by accident.
 */
export type CallerAllowList<S extends DescService> = { readonly [M in keyof S['method']]: readonly CallerName[] };

export interface ServiceCallers {
  service: DescService;
  callers: Readonly<Record<string, readonly CallerName[]>>;
}

export function allowCallers<S extends DescService>(service: S, callers: CallerAllowList<S>): ServiceCallers {
  return { service, callers: callers as Readonly<Record<string, readonly CallerName[]>> };
}

/**
 * The policy the RPC server checks before each call: the procedure's allow-list must name one of
 * the caller's certificate names. Procedures not listed are refused.
 */
export function callerPolicy(...services: ServiceCallers[]): CallerPolicy {
  const allowed = new Map<string, ReadonlySet<string>>();
  for (const { service, callers } of services) {
    for (const method of service.methods) {
      allowed.set(`${service.typeName}/${method.name}`, new Set(callers[method.localName] ?? []));
    }
  }
  return (procedure: string, caller: CallerIdentity) => {
    const names = allowed.get(procedure);
    return names !== undefined && caller.names.some((name) => names.has(name));
  };
}
