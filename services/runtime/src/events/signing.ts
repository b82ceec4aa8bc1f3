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
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, hkdfSync, sign, verify, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { MsgHdrs } from 'nats';
import { Counter, type Registry } from 'prom-client';
import { ConfigError, type Setting } from '../config';

/** The header carrying an event's own signature (base64 of the 64 signature bytes). */
export const SIGNATURE_HEADER = 'coinvoice-signature';

/**
 * The header carrying a batch signature (docs/events.md#batch-signatures): one Ed25519 signature
 * over the Merkle root of the events a relay publishes together, and this event's path to it, as
 * `<events in the batch>.<this event's index>.<signature>.<path>` (base64url; the path is the
 * sibling hashes' 32 bytes each, concatenated, empty for a batch of one).
 */
export const BATCH_SIGNATURE_HEADER = 'coinvoice-batch-signature';

const DOMAIN = 'coinvoice-event-v1\n';
const PRODUCER = /^[a-z][a-z0-9_]*$/;

function signedBytes(subject: string, eventId: string, body: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from(`${DOMAIN}${JSON.stringify([subject, eventId])}\n`, 'utf8'), body]);
}

/** An event as signed: where it goes, its id and its bytes. */
export interface SignedEvent {
  subject: string;
  eventId: string;
  body: Uint8Array;
}

/*
 * Batch signatures (docs/events.md#batch-signatures). The tree is RFC 9162's (§2.1.1): a leaf is
 * SHA-256(0x00 ‖ the event's signed bytes), a node SHA-256(0x01 ‖ left ‖ right), a tree of n > 1
 * leaves splits at the largest power of two below n. The signature covers the leaf count and the
 * root under a domain of its own, so it never verifies as an event's own signature (nor the
 * reverse), and a path checked against a count cannot stand for a leaf of another tree shape.
 */
const BATCH_DOMAIN = 'coinvoice-event-batch-v1\n';
const HASH_BYTES = 32;
/** Batches a relay signs at most at once: more would only lengthen every event's path. */
export const MAX_SIGNED_BATCH = 1024;

function leafHash(event: SignedEvent): Buffer {
  return createHash('sha256').update(Buffer.of(0)).update(signedBytes(event.subject, event.eventId, event.body)).digest();
}

function nodeHash(left: Buffer, right: Buffer): Buffer {
  return createHash('sha256').update(Buffer.of(1)).update(left).update(right).digest();
}

function batchSignedBytes(count: number, root: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${BATCH_DOMAIN}${count}\n`, 'utf8'), root]);
}

/** The largest power of two below n (n > 1). */
function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** The root of `leaves`, and into `paths[i]` each leaf's siblings from the bottom up (RFC 9162 §2.1.3.1). */
function treeOf(leaves: readonly Buffer[], paths: Buffer[][], offset: number): Buffer {
  if (leaves.length === 1) return leaves[0]!;
  const k = split(leaves.length);
  const left = treeOf(leaves.slice(0, k), paths, offset);
  const right = treeOf(leaves.slice(k), paths, offset + k);
  for (let i = 0; i < k; i++) paths[offset + i]!.push(right);
  for (let i = k; i < leaves.length; i++) paths[offset + i]!.push(left);
  return nodeHash(left, right);
}

/** The root a leaf's path leads to (RFC 9162 §2.1.3.2); undefined when the path does not fit the tree's shape. */
function rootFromPath(leaf: Buffer, index: number, count: number, path: readonly Buffer[]): Buffer | undefined {
  let fn = index;
  let sn = count - 1;
  let r = leaf;
  for (const sibling of path) {
    if (sn === 0) return undefined;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(sibling, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = nodeHash(r, sibling);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : undefined;
}

interface BatchSignature {
  count: number;
  index: number;
  signature: Buffer;
  path: Buffer[];
}

const BATCH_HEADER = /^([1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.([A-Za-z0-9_-]{86})\.([A-Za-z0-9_-]*)$/;

function parseBatchSignature(text: string): BatchSignature | undefined {
  const match = BATCH_HEADER.exec(text);
  if (!match) return undefined;
  const count = Number(match[1]);
  const index = Number(match[2]);
  const signature = Buffer.from(match[3]!, 'base64url');
  const pathBytes = Buffer.from(match[4]!, 'base64url');
  if (count > MAX_SIGNED_BATCH || index >= count || signature.length !== 64 || pathBytes.length % HASH_BYTES !== 0) return undefined;
  // base64url that does not round-trip carries bits beyond its bytes: one value, one text.
  if (pathBytes.toString('base64url') !== match[4] || signature.toString('base64url') !== match[3]) return undefined;
  const path: Buffer[] = [];
  for (let at = 0; at < pathBytes.length; at += HASH_BYTES) path.push(pathBytes.subarray(at, at + HASH_BYTES));
  return { count, index, signature, path };
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

  /**
   * A 32-byte key derived from this private key for `purpose` (HKDF-SHA256): what every replica of
   * the service holding this key can compute, and nobody else (the notifier's listen cursors).
   * Domain-separated by `purpose`: it reveals nothing of the signing key.
   */
  deriveKey(purpose: string): Buffer {
    const material = this.key.export({ format: 'der', type: 'pkcs8' });
    return Buffer.from(hkdfSync('sha256', material, Buffer.from('coinvoice event key derivation'), Buffer.from(purpose), 32));
  }

  /** The signature of an event, base64. */
  sign(subject: string, eventId: string, body: Uint8Array): string {
    return sign(null, signedBytes(subject, eventId, body), this.key).toString('base64');
  }

  /**
   * The signature header of each event, in order (EVENT_SIGNATURES): `each` signs every event on
   * its own, `batch` the events together (signBatch).
   */
  signatureHeaders(events: readonly SignedEvent[], signatures: 'each' | 'batch'): { header: string; value: string }[] {
    return signatures === 'batch' ? this.signBatch(events) : events.map((event) => this.ownSignature(event));
  }

  private ownSignature(event: SignedEvent): { header: string; value: string } {
    return { header: SIGNATURE_HEADER, value: this.sign(event.subject, event.eventId, event.body) };
  }

  /**
   * Signs events published together with one signature (docs/events.md#batch-signatures): for each
   * event, in order, the header to set and its value. A batch of one is signed as an event of its
   * own: what a consumer of any version verifies.
   */
  signBatch(events: readonly SignedEvent[]): { header: string; value: string }[] {
    if (events.length > MAX_SIGNED_BATCH) throw new RangeError(`at most ${MAX_SIGNED_BATCH} events are signed together, not ${events.length}`);
    if (events.length === 1) return [this.ownSignature(events[0]!)];
    if (events.length === 0) return [];
    const paths: Buffer[][] = events.map(() => []);
    const root = treeOf(events.map(leafHash), paths, 0);
    const signature = sign(null, batchSignedBytes(events.length, root), this.key).toString('base64url');
    return paths.map((path, index) => ({
      header: BATCH_SIGNATURE_HEADER,
      value: `${events.length}.${index}.${signature}.${Buffer.concat(path).toString('base64url')}`,
    }));
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

/** Batch roots whose signature a verifier remembers having checked (a relay's batch is ≤ 1,024 events). */
const VERIFIED_ROOTS_KEPT = 4096;

/** Checks events against their producers' public keys, and counts what it refuses. */
export class EventVerifier {
  private readonly rejected: Counter<'reason' | 'consumer'> | undefined;
  /**
   * Batch signatures this verifier checked and found good, by producer, count, root and signature:
   * the other events of a batch are checked by their path alone (a hash per level, no Ed25519).
   * Only a signature that verified is remembered; keys do not change while a process runs.
   */
  private readonly verifiedRoots = new Set<string>();

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

  /**
   * undefined when the event is signed by a key of `producer`, on its own or in a batch; else why
   * not. `headers` are the message's: the signature is read from them.
   */
  check(producer: string, subject: string, eventId: string, body: Uint8Array, headers: MsgHdrs | undefined): EventRejection | undefined {
    const own = headers?.get(SIGNATURE_HEADER) || undefined;
    const batch = headers?.get(BATCH_SIGNATURE_HEADER) || undefined;
    if (!own && !batch) return 'missing_signature';
    const keys = this.keys.get(producer);
    if (!keys || keys.length === 0) return 'unknown_producer';
    if (own && batch) return 'bad_signature'; // one event, one signature: never a choice of two
    if (own) {
      const bytes = Buffer.from(own, 'base64');
      if (bytes.length !== 64) return 'bad_signature';
      const message = signedBytes(subject, eventId, body);
      return keys.some((key) => verify(null, message, key, bytes)) ? undefined : 'bad_signature';
    }
    const parsed = parseBatchSignature(batch!);
    if (!parsed) return 'bad_signature';
    const root = rootFromPath(leafHash({ subject, eventId, body }), parsed.index, parsed.count, parsed.path);
    if (!root) return 'bad_signature';
    const remembered = `${producer}\n${parsed.count}\n${root.toString('base64')}\n${parsed.signature.toString('base64')}`;
    if (this.verifiedRoots.has(remembered)) return undefined;
    const message = batchSignedBytes(parsed.count, root);
    if (!keys.some((key) => verify(null, message, key, parsed.signature))) return 'bad_signature';
    if (this.verifiedRoots.size >= VERIFIED_ROOTS_KEPT) this.verifiedRoots.delete(this.verifiedRoots.values().next().value!);
    this.verifiedRoots.add(remembered);
    return undefined;
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
  /**
   * `each`: every event signed on its own, what every consumer version verifies. `batch`: the events
   * a relay publishes together share one signature (docs/events.md#batch-signatures) — only once
   * every consumer (payout, notifier, every gateway replica) runs a version that verifies them.
   */
  EVENT_SIGNATURES: {
    expected: "each (every event signed on its own) or batch (a relay's batch signed once: every consumer must verify batch signatures, docs/events.md#batch-signatures)",
    default: 'each',
    parse: (raw: string) => (raw === 'each' || raw === 'batch' ? raw : undefined),
  } satisfies Setting<'each' | 'batch'>,
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
