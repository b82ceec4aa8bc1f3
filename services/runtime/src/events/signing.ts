/**
 * Signed events (docs/events.md): every event a service publishes carries an Ed25519 signature by
 * that service's key, and a consumer acts on an event only when the signature verifies against a
 * public key of the service that owns the event's type (`invoice.paid` → invoice). NATS
 * permissions stop a stranger publishing; the signature is the second wall, for a client that got
 * past them (or a copied message replayed under a new id or subject).
 *
 * What is signed: the subject (namespace included, so a test namespace's event never counts in
 * another), the event id (the Nats-Msg-Id: a message re-published under a new id does not verify)
 * and the body's bytes, as
 *
 *   "coinvoice-event-v1\n" + JSON.stringify([subject, eventId]) + "\n" + body
 *
 * (JSON escapes line breaks, so the prefix ends unambiguously at the second "\n").
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { MsgHdrs } from 'nats';
import { Counter, type Registry } from 'prom-client';
import { ConfigError, type Setting } from '../config';

/** The header carrying the signature (base64 of the 64 signature bytes). */
export const SIGNATURE_HEADER = 'coinvoice-signature';

const DOMAIN = 'coinvoice-event-v1\n';
const PRODUCER = /^[a-z][a-z0-9_]*$/;

function signedBytes(subject: string, eventId: string, body: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from(`${DOMAIN}${JSON.stringify([subject, eventId])}\n`, 'utf8'), body]);
}

/** A public key as EVENT_VERIFY_KEYS carries it: the 32 raw bytes, base64url (JWK `x`). */
export function publicKeyText(key: KeyObject): string {
  const jwk = (key.type === 'public' ? key : createPublicKey(key)).export({ format: 'jwk' });
  if (jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new Error('not an Ed25519 key');
  return jwk.x;
}

function publicKeyOf(text: string): KeyObject | undefined {
  if (!/^[A-Za-z0-9_-]{43}$/.test(text)) return undefined;
  try {
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: text }, format: 'jwk' });
  } catch {
    return undefined;
  }
}

/** A new key pair: the private key as PKCS#8 PEM (what EVENT_SIGNING_KEY_FILE holds) and the public key's text. */
export function generateEventKeyPair(): { privateKeyPem: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(), publicKey: publicKeyText(publicKey) };
}

/** Signs what one service publishes. */
export class EventSigner {
  /** The key from a PEM file (EVENT_SIGNING_KEY_FILE); throws naming the file when it is not an Ed25519 private key. */
  static fromFile(file: string): EventSigner {
    let key: KeyObject;
    try {
      key = createPrivateKey(readFileSync(file));
    } catch (err) {
      throw new Error(`${file}: not a readable private key in PEM (${err instanceof Error ? err.message : String(err)})`);
    }
    return new EventSigner(key, file);
  }

  static fromPem(pem: string): EventSigner {
    return new EventSigner(createPrivateKey(pem), 'PEM');
  }

  /** This key's public half, as EVENT_VERIFY_KEYS lists it. */
  readonly publicKey: string;

  private constructor(
    private readonly key: KeyObject,
    source: string,
  ) {
    if (key.asymmetricKeyType !== 'ed25519') throw new Error(`${source}: an Ed25519 private key is expected, not ${key.asymmetricKeyType ?? 'unknown'}`);
    this.publicKey = publicKeyText(key);
  }

  /** The signature of an event, base64. */
  sign(subject: string, eventId: string, body: Uint8Array): string {
    return sign(null, signedBytes(subject, eventId, body), this.key).toString('base64');
  }

  /** Sets the signature header of a message about to be published. */
  signInto(headers: MsgHdrs, subject: string, eventId: string, body: Uint8Array): void {
    headers.set(SIGNATURE_HEADER, this.sign(subject, eventId, body));
  }
}

/** Why an event was refused; the `reason` label of events_rejected_total. */
export type EventRejection = 'missing_signature' | 'bad_signature' | 'unknown_producer';

export type VerifyKeys = ReadonlyMap<string, readonly KeyObject[]>;

/**
 * EVENT_VERIFY_KEYS: `<producer>=<public key>` pairs, comma-separated; a producer named twice has
 * several keys (rotation: the new and the old one, until the old one has signed its last event).
 * Undefined when malformed.
 */
export function parseVerifyKeys(raw: string): VerifyKeys | undefined {
  const keys = new Map<string, KeyObject[]>();
  for (const entry of raw.split(',').map((part) => part.trim()).filter((part) => part !== '')) {
    const eq = entry.indexOf('=');
    const producer = entry.slice(0, eq).trim();
    const key = publicKeyOf(entry.slice(eq + 1).trim());
    if (eq <= 0 || !PRODUCER.test(producer) || !key) return undefined;
    keys.set(producer, [...(keys.get(producer) ?? []), key]);
  }
  return keys;
}

/** `invoice=<key>,payout=<key>` from public keys by producer (the launcher and the tests write it). */
export function formatVerifyKeys(keys: Record<string, string | readonly string[]>): string {
  return Object.entries(keys)
    .flatMap(([producer, list]) => (typeof list === 'string' ? [list] : list).map((key) => `${producer}=${key}`))
    .join(',');
}

/** Checks events against their producers' public keys, and counts what it refuses. */
export class EventVerifier {
  private readonly rejected: Counter<'reason' | 'consumer'> | undefined;

  constructor(
    private readonly keys: VerifyKeys,
    registry?: Registry,
  ) {
    this.rejected = registry
      ? new Counter({
          name: 'events_rejected_total',
          help: 'Events a consumer refused to act on (missing or wrong signature, producer without a key), dead-lettered',
          labelNames: ['reason', 'consumer'],
          registers: [registry],
        })
      : undefined;
  }

  /** Producers this verifier holds keys of. */
  producers(): string[] {
    return [...this.keys.keys()];
  }

  /** The producers of `producers` this verifier holds no key of. */
  missingProducers(producers: readonly string[]): string[] {
    return producers.filter((producer) => (this.keys.get(producer)?.length ?? 0) === 0);
  }

  /** Throws unless every producer named has a key: a consumer that could verify nothing must not start. */
  requireProducers(producers: readonly string[], consumer: string): void {
    const missing = this.missingProducers(producers);
    if (missing.length > 0) {
      throw new Error(`EVENT_VERIFY_KEYS has no key of ${missing.join(', ')}, whose events consumer ${consumer} reads`);
    }
  }

  /** undefined when the event is signed by a key of `producer`; else why not. */
  check(producer: string, subject: string, eventId: string, body: Uint8Array, signature: string | undefined): EventRejection | undefined {
    if (!signature) return 'missing_signature';
    const keys = this.keys.get(producer);
    if (!keys || keys.length === 0) return 'unknown_producer';
    const bytes = Buffer.from(signature, 'base64');
    if (bytes.length !== 64) return 'bad_signature';
    const message = signedBytes(subject, eventId, body);
    return keys.some((key) => verify(null, message, key, bytes)) ? undefined : 'bad_signature';
  }

  /** Counts a refusal (events_rejected_total{reason,consumer}). */
  countRejection(reason: EventRejection, consumer: string): void {
    this.rejected?.inc({ reason, consumer });
  }
}

/**
 * The settings of a service's event keys. EVENT_SIGNING_KEY_FILE has no default in production and
 * is checked at start everywhere (signerOf): a service without its key must not run, and there is
 * no generated fallback — npm start and the test harnesses write real key files.
 */
export const eventKeySettings = {
  EVENT_SIGNING_KEY_FILE: {
    expected: "the path of this service's Ed25519 private key, PEM (openssl genpkey -algorithm ed25519; npm start writes one per service in .data/event-keys/)",
    devDefault: '',
    parse: (raw: string) => raw.trim(),
  } satisfies Setting<string>,
  EVENT_VERIFY_KEYS: {
    expected: 'comma-separated <producer>=<Ed25519 public key, 43 characters base64url> pairs (a producer named twice: both keys, for rotation)',
    default: '',
    parse: parseVerifyKeys,
  } satisfies Setting<VerifyKeys>,
};

/** The service's signer from EVENT_SIGNING_KEY_FILE; a ConfigError naming the variable when it is unset or unusable. */
export function signerOf(config: { EVENT_SIGNING_KEY_FILE: string }): EventSigner {
  const { expected } = eventKeySettings.EVENT_SIGNING_KEY_FILE;
  if (config.EVENT_SIGNING_KEY_FILE === '') throw new ConfigError('EVENT_SIGNING_KEY_FILE', expected, undefined);
  try {
    return EventSigner.fromFile(config.EVENT_SIGNING_KEY_FILE);
  } catch (err) {
    throw new ConfigError('EVENT_SIGNING_KEY_FILE', `${expected}; ${err instanceof Error ? err.message : String(err)}`, config.EVENT_SIGNING_KEY_FILE);
  }
}
