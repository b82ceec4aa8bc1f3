/**
 * Batch signatures (docs/events.md#batch-signatures): the events a relay publishes together share
 * one Ed25519 signature over their Merkle root; each carries its path. Pure: real keys, no broker.
 */
import { createRequire } from 'node:module';
import { headers as natsHeaders, type MsgHdrs } from 'nats';
import { BATCH_SIGNATURE_HEADER, EventSigner, EventVerifier, generateEventKeyPair, MAX_SIGNED_BATCH, parseVerifyKeys, SIGNATURE_HEADER, type SignedEvent } from '../src/events/signing';

// The module object signing.ts calls verify on (a namespace import here would be a copy).
const nodeCrypto = createRequire(__filename)('node:crypto') as typeof import('node:crypto');

const encoder = new TextEncoder();
const invoiceKey = EventSigner.fromPem(generateEventKeyPair().privateKeyPem);
const strangerKey = EventSigner.fromPem(generateEventKeyPair().privateKeyPem);

function verifier(): EventVerifier {
  const keys = parseVerifyKeys(`invoice=${invoiceKey.publicKey}`);
  if (!keys) throw new Error('verify keys');
  return new EventVerifier(keys);
}

function events(n: number, prefix = 'evt'): SignedEvent[] {
  return Array.from({ length: n }, (_, i) => ({
    subject: 'cv.invoice.paid',
    eventId: `${prefix}-${i}`,
    body: encoder.encode(JSON.stringify({ invoiceId: `inv_${prefix}_${i}`, amountPaid: `0.${String(i + 1).padStart(8, '0')}` })),
  }));
}

function headersOf(signature: { header: string; value: string }): MsgHdrs {
  const headers = natsHeaders();
  headers.set(signature.header, signature.value);
  return headers;
}

function batchHeader(value: string): MsgHdrs {
  return headersOf({ header: BATCH_SIGNATURE_HEADER, value });
}

describe('batch signatures', () => {
  it('verifies every event of batches of every shape, each alone, and a batch of one as an event signed on its own', () => {
    const check = verifier();
    for (const n of [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 33, 64, 100]) {
      const batch = events(n, `n${n}`);
      const signatures = invoiceKey.signBatch(batch);
      expect(signatures).toHaveLength(n);
      signatures.forEach((signature, i) => {
        expect(signature.header).toBe(n === 1 ? SIGNATURE_HEADER : BATCH_SIGNATURE_HEADER);
        // A fresh verifier: nothing remembered from the batch's other events.
        expect(verifier().check('invoice', batch[i]!.subject, batch[i]!.eventId, batch[i]!.body, headersOf(signature))).toBeUndefined();
        expect(check.check('invoice', batch[i]!.subject, batch[i]!.eventId, batch[i]!.body, headersOf(signature))).toBeUndefined();
      });
    }
  });

  it('checks the signature of a batch once; its other events by their path alone', () => {
    const batch = events(17);
    const signatures = invoiceKey.signBatch(batch);
    const check = verifier();
    const verify = jest.spyOn(nodeCrypto, 'verify');
    try {
      signatures.forEach((signature, i) => expect(check.check('invoice', batch[i]!.subject, batch[i]!.eventId, batch[i]!.body, headersOf(signature))).toBeUndefined());
      expect(verify).toHaveBeenCalledTimes(1);
      // A forged event under the remembered signature still needs a path to the same root: none.
      expect(check.check('invoice', batch[0]!.subject, 'forged', batch[0]!.body, headersOf(signatures[0]!))).toBe('bad_signature');
    } finally {
      verify.mockRestore();
    }
  });

  it("binds each event's own subject, id and body, its index and the batch's size", () => {
    const batch = events(6);
    const [, third] = [0, 2].map((i) => invoiceKey.signBatch(batch)[i]!.value);
    const value = third!;
    const [count, index, signature, path] = value.split('.') as [string, string, string, string];
    const event = batch[2]!;
    const check = verifier();
    const ok = (v: string, e: SignedEvent = event) => check.check('invoice', e.subject, e.eventId, e.body, batchHeader(v));
    expect(ok(value)).toBeUndefined();
    expect(ok(value, { ...event, body: encoder.encode('{"invoiceId":"inv_evt_2","amountPaid":"9.00000000"}') })).toBe('bad_signature');
    expect(ok(value, { ...event, eventId: 'evt-2-replayed' })).toBe('bad_signature');
    expect(ok(value, { ...event, subject: 'cv.invoice.late_payment' })).toBe('bad_signature');
    expect(ok(value, { ...event, subject: 'other.invoice.paid' })).toBe('bad_signature');
    // Another event of the batch under this event's path.
    expect(ok(value, batch[3])).toBe('bad_signature');
    expect(ok(value, batch[0])).toBe('bad_signature');
    // The same path at another index, in a tree of another size, cut short or lengthened.
    expect(ok(`${count}.3.${signature}.${path}`)).toBe('bad_signature');
    expect(ok(`${count}.0.${signature}.${path}`)).toBe('bad_signature');
    expect(ok(`5.${index}.${signature}.${path}`)).toBe('bad_signature');
    expect(ok(`7.${index}.${signature}.${path}`)).toBe('bad_signature');
    expect(ok(`${count}.${index}.${signature}.${Buffer.from(path, 'base64url').subarray(32).toString('base64url')}`)).toBe('bad_signature');
    expect(ok(`${count}.${index}.${signature}.${path}${Buffer.alloc(32, 1).toString('base64url')}`)).toBe('bad_signature');
    // One signature, one text: the last character's 4 spare bits changed decode to the same bytes.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const twin = `${signature.slice(0, -1)}${alphabet[alphabet.indexOf(signature.at(-1)!) ^ 1]}`;
    expect(Buffer.from(twin, 'base64url').equals(Buffer.from(signature, 'base64url'))).toBe(true);
    expect(ok(`${count}.${index}.${twin}.${path}`)).toBe('bad_signature');
    // Malformed: every part is required and bounded.
    for (const malformed of ['', value.slice(1), `${count}.${index}.${signature}`, `06.${index}.${signature}.${path}`, `${count}.6.${signature}.${path}`, `${MAX_SIGNED_BATCH + 1}.0.${signature}.${path}`, `${count}.${index}.${signature.slice(1)}.${path}`, `${count}.${index}.${signature}.${path}A`]) {
      expect(ok(malformed)).toBe(malformed === '' ? 'missing_signature' : 'bad_signature');
    }
  });

  it("refuses a batch signed by another key, another producer's batch, and an event carrying both kinds of signature", () => {
    const batch = events(3);
    const foreign = strangerKey.signBatch(batch);
    const check = verifier();
    expect(check.check('invoice', batch[1]!.subject, batch[1]!.eventId, batch[1]!.body, headersOf(foreign[1]!))).toBe('bad_signature');
    const own = invoiceKey.signBatch(batch);
    expect(check.check('payout', batch[1]!.subject, batch[1]!.eventId, batch[1]!.body, headersOf(own[1]!))).toBe('unknown_producer');
    const both = headersOf(own[1]!);
    both.set(SIGNATURE_HEADER, invoiceKey.sign(batch[1]!.subject, batch[1]!.eventId, batch[1]!.body));
    expect(check.check('invoice', batch[1]!.subject, batch[1]!.eventId, batch[1]!.body, both)).toBe('bad_signature');
    // A batch signature is not an event's own signature, nor the reverse.
    const rootSignature = own[0]!.value.split('.')[2]!;
    const asOwn = natsHeaders();
    asOwn.set(SIGNATURE_HEADER, Buffer.from(rootSignature, 'base64url').toString('base64'));
    expect(check.check('invoice', batch[0]!.subject, batch[0]!.eventId, batch[0]!.body, asOwn)).toBe('bad_signature');
  });

  it('signs at most MAX_SIGNED_BATCH events together', () => {
    expect(invoiceKey.signBatch([])).toEqual([]);
    expect(() => invoiceKey.signBatch(events(MAX_SIGNED_BATCH + 1))).toThrow(RangeError);
    const largest = events(MAX_SIGNED_BATCH);
    const signatures = invoiceKey.signBatch(largest);
    const last = MAX_SIGNED_BATCH - 1;
    expect(verifier().check('invoice', largest[last]!.subject, largest[last]!.eventId, largest[last]!.body, headersOf(signatures[last]!))).toBeUndefined();
  });
});
