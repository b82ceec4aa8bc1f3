/**
 * The event keys of a local system (docs/events.md): one Ed25519 key file per service in
 * `<data dir>/event-keys/<service>.pem`, made on first start and kept, so the processes run the
 * same signing and verifying code as in production (keys mounted from Secrets there).
 */
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { EventSigner, formatVerifyKeys, generateEventKeyPair, type ServiceName } from '@coinvoice/runtime';

export interface LocalEventKeys {
  /** EVENT_SIGNING_KEY_FILE of a service (its watchers: the invoice service's). */
  signingKeyFile(service: ServiceName): string;
  /** EVENT_VERIFY_KEYS of every process: each service's public key. */
  verifyKeys: string;
}

export function ensureEventKeys(dir: string, services: readonly ServiceName[]): LocalEventKeys {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files = new Map<ServiceName, string>();
  const publicKeys: Record<string, string> = {};
  for (const service of services) {
    const file = path.join(dir, `${service}.pem`);
    if (!existsSync(file)) {
      writeFileSync(file, generateEventKeyPair().privateKeyPem, { mode: 0o600, flag: 'wx' });
      chmodSync(file, 0o600);
    }
    files.set(service, file);
    publicKeys[service] = EventSigner.fromFile(file).publicKey;
  }
  return {
    signingKeyFile(service) {
      const file = files.get(service);
      if (!file) throw new Error(`no event key for ${service}`);
      return file;
    },
    verifyKeys: formatVerifyKeys(publicKeys),
  };
}
