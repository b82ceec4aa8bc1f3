/**
 * Event keys for tests (docs/events.md): real key files, one per service, made once per Jest
 * worker, so a service under test signs and verifies exactly as in production. A test that
 * publishes as a service signs with that service's key (`signedHeaders`); a system booted by the
 * launcher has its own keys in its data folder (`systemEventKeys`).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BATCH_SIGNATURE_HEADER, EventSigner, formatVerifyKeys, generateEventKeyPair, MSG_ID_HEADER, SIGNATURE_HEADER } from '@coinvoice/runtime';
import { headers as natsHeaders, type MsgHdrs } from 'nats';

export const EVENT_PRODUCERS = ['auth', 'invoice', 'payout', 'notifier'] as const;
export type EventProducer = (typeof EVENT_PRODUCERS)[number];

export interface EventKeys {
  /** EVENT_SIGNING_KEY_FILE of a service. */
  file(producer: EventProducer): string;
  signer(producer: string): EventSigner;
  /** EVENT_VERIFY_KEYS holding every service's public key. */
  verifyKeys: string;
}

function keysIn(dir: string): EventKeys {
  const signers = new Map<string, EventSigner>();
  for (const producer of EVENT_PRODUCERS) signers.set(producer, EventSigner.fromFile(path.join(dir, `${producer}.pem`)));
  return {
    file: (producer) => path.join(dir, `${producer}.pem`),
    signer(producer) {
      const signer = signers.get(producer);
      if (!signer) throw new Error(`no event key for producer ${producer}`);
      return signer;
    },
    verifyKeys: formatVerifyKeys(Object.fromEntries([...signers].map(([producer, signer]) => [producer, signer.publicKey]))),
  };
}

let workerKeys: EventKeys | undefined;

/** This Jest worker's keys (files in a temporary folder removed at exit). */
export function testEventKeys(): EventKeys {
  if (!workerKeys) {
    const dir = mkdtempSync(path.join(tmpdir(), 'coinvoice-event-keys-'));
    for (const producer of EVENT_PRODUCERS) writeFileSync(path.join(dir, `${producer}.pem`), generateEventKeyPair().privateKeyPem, { mode: 0o600 });
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    workerKeys = keysIn(dir);
  }
  return workerKeys;
}

/** The keys the launcher made for a booted system (`<data dir>/event-keys`). */
export function systemEventKeys(system: { dataDir: string }): EventKeys {
  return keysIn(path.join(system.dataDir, 'event-keys'));
}

/** The settings of a service under test: its signing key file and every producer's public key. */
export function eventKeyEnv(producer: EventProducer, keys: EventKeys = testEventKeys()): NodeJS.ProcessEnv {
  return { EVENT_SIGNING_KEY_FILE: keys.file(producer), EVENT_VERIFY_KEYS: keys.verifyKeys };
}

/**
 * Sets the signature header as the producer's outbox relay does: `subject`'s event type names the
 * producer (`<ns>.invoice.paid` → invoice). `headers` should carry no Nats-Msg-Id (it goes as msgID).
 */
export function signInto(headers: MsgHdrs, keys: EventKeys, subject: string, eventId: string, body: Uint8Array): MsgHdrs {
  const producer = subject.split('.')[1] ?? '';
  headers.set(SIGNATURE_HEADER, keys.signer(producer).sign(subject, eventId, body));
  return headers;
}

/** A copy of a stored message's headers without its Nats-Msg-Id and signature (its own or its batch's) (to publish it again under a new id). */
export function copyHeaders(original: MsgHdrs): MsgHdrs {
  const copy = natsHeaders();
  for (const [name, values] of original) {
    const lower = name.toLowerCase();
    if (lower === MSG_ID_HEADER.toLowerCase() || lower === SIGNATURE_HEADER || lower === BATCH_SIGNATURE_HEADER) continue;
    for (const value of values) copy.append(name, value);
  }
  return copy;
}
