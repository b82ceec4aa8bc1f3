/**
 * encodeBinary (services/runtime/src/protobuf-binary.ts) writes exactly what @bufbuild/protobuf's
 * toBinary writes, and decodeBinary reads what fromBinary reads (or refuses what it refuses), for every message type this project defines (and the well-known types inside
 * them), filled at random many times over: every scalar type at its edges, fields with explicit
 * presence set to their zero value, empty and long lists, maps, every oneof case, nesting, strings
 * beyond ASCII (lone surrogates too), and unknown fields kept from a decoded message. A type built
 * at run time adds the scalar kinds the project's own types lack (fixed64, sfixed64…) and their
 * range refusals.
 */
import { create, createFileRegistry, fromBinary, ScalarType, toBinary, type DescField, type DescFile, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import {
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorProtoSchema,
  file_google_protobuf_struct,
  file_google_protobuf_wrappers,
} from '@bufbuild/protobuf/wkt';
import { decodeBinary, encodeBinary } from '../src/protobuf-binary';
import { file_grpc_health_v1_health } from '../src/gen/grpc/health/v1/health_pb';
import { file_coinvoice_invoice_v1_invoice } from '../src/gen/coinvoice/invoice/v1/invoice_pb';
import { file_coinvoice_invoice_v1_events } from '../src/gen/coinvoice/invoice/v1/events_pb';
import { file_coinvoice_auth_v1_auth } from '../src/gen/coinvoice/auth/v1/auth_pb';
import { file_coinvoice_auth_v1_events } from '../src/gen/coinvoice/auth/v1/events_pb';
import { file_coinvoice_rpc_v1_batch } from '../src/gen/coinvoice/rpc/v1/batch_pb';
import { file_coinvoice_common_v1_error } from '../src/gen/coinvoice/common/v1/error_pb';
import { file_coinvoice_payout_v1_events } from '../src/gen/coinvoice/payout/v1/events_pb';
import { file_coinvoice_payout_v1_payout } from '../src/gen/coinvoice/payout/v1/payout_pb';
import { file_coinvoice_notifier_v1_events } from '../src/gen/coinvoice/notifier/v1/events_pb';
import { file_coinvoice_notifier_v1_notifier } from '../src/gen/coinvoice/notifier/v1/notifier_pb';
import { file_coinvoice_signer_v1_signer } from '../src/gen/coinvoice/signer/v1/signer_pb';
import { InvoiceSchema } from '../src/gen/coinvoice/invoice/v1/invoice_pb';

const FILES: DescFile[] = [
  file_grpc_health_v1_health,
  file_coinvoice_invoice_v1_invoice,
  file_coinvoice_invoice_v1_events,
  file_coinvoice_auth_v1_auth,
  file_coinvoice_auth_v1_events,
  file_coinvoice_rpc_v1_batch,
  file_coinvoice_common_v1_error,
  file_coinvoice_payout_v1_events,
  file_coinvoice_payout_v1_payout,
  file_coinvoice_notifier_v1_events,
  file_coinvoice_notifier_v1_notifier,
  file_coinvoice_signer_v1_signer,
];

/** Every message type of the files, nested ones and those they refer to (well-known types) included. */
function allMessages(): DescMessage[] {
  const found = new Map<string, DescMessage>();
  const visit = (message: DescMessage) => {
    if (found.has(message.typeName)) return;
    found.set(message.typeName, message);
    message.nestedMessages.forEach(visit);
    for (const field of message.fields) if (field.message) visit(field.message);
  };
  for (const file of FILES) file.messages.forEach(visit);
  return [...found.values()];
}

const MESSAGES = allMessages();

/** A small deterministic generator (mulberry32), so a failure names a seed that reproduces it. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STRINGS = ['', 'a', 'BTC', '0.00020346', 'https://example.com/ok?x=1&y=2', 'Café ☕', '日本語の説明', '🎉 emoji', 'lone \ud800 surrogate', 'x'.repeat(65), 'y'.repeat(300), 'é'.repeat(70)];

function pick<T>(rand: () => number, items: readonly T[]): T {
  return items[Math.floor(rand() * items.length)]!;
}

function scalarValue(rand: () => number, scalar: ScalarType): unknown {
  switch (scalar) {
    case ScalarType.STRING:
      return pick(rand, STRINGS);
    case ScalarType.BYTES:
      return pick(rand, [new Uint8Array(0), new Uint8Array([0]), Uint8Array.from({ length: 200 }, (_, i) => (i * 7) & 0xff)]);
    case ScalarType.BOOL:
      return rand() < 0.5;
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return pick(rand, [0, 1, -1, 127, 128, 300, 2 ** 31 - 1, -(2 ** 31), Math.floor(rand() * 2 ** 31) - 2 ** 30]);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return pick(rand, [0, 1, 127, 128, 16384, 2 ** 32 - 1, Math.floor(rand() * 2 ** 32)]);
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return pick(rand, [0n, 1n, -1n, 1_764_300_000n, 2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n), BigInt(Math.floor(rand() * 2 ** 40))]);
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return pick(rand, [0n, 1n, 127n, 128n, 2n ** 32n, 2n ** 64n - 1n, BigInt(Math.floor(rand() * 2 ** 50))]);
    case ScalarType.DOUBLE:
      return pick(rand, [0, -0, 1.5, -2.25, Number.MAX_VALUE, Number.MIN_VALUE, Infinity, -Infinity, NaN, rand()]);
    case ScalarType.FLOAT:
      return pick(rand, [0, -0, 1.5, -2.25, Math.fround(rand()), Infinity, NaN]);
  }
}

function fieldValue(rand: () => number, field: DescField, depth: number): unknown {
  switch (field.fieldKind) {
    case 'scalar':
      return scalarValue(rand, field.scalar);
    case 'enum':
      return pick(rand, field.enum.values).number;
    case 'message':
      return randomMessage(rand, field.message, depth + 1);
    case 'list': {
      const n = pick(rand, [0, 1, 2, 5, 40]);
      return Array.from({ length: n }, () =>
        field.listKind === 'message' ? randomMessage(rand, field.message, depth + 1) : field.listKind === 'enum' ? pick(rand, field.enum.values).number : scalarValue(rand, field.scalar),
      );
    }
    case 'map': {
      const entries: Record<string, unknown> = {};
      const n = pick(rand, [0, 1, 3]);
      for (let i = 0; i < n; i++) {
        const key = field.mapKey === ScalarType.STRING ? `${pick(rand, STRINGS)}${i}` : String(i);
        entries[key] = field.mapKind === 'message' ? randomMessage(rand, field.message, depth + 1) : field.mapKind === 'enum' ? pick(rand, field.enum.values).number : scalarValue(rand, field.scalar);
      }
      return entries;
    }
  }
}

function randomMessage(rand: () => number, schema: DescMessage, depth = 0): MessageShape<DescMessage> {
  const message = create(schema) as unknown as Record<string, unknown>;
  if (depth > 3) return message as unknown as MessageShape<DescMessage>;
  for (const oneof of schema.oneofs) {
    if (rand() < 0.3) continue;
    const field = pick(rand, oneof.fields);
    message[oneof.localName] = { case: field.localName, value: fieldValue(rand, field, depth) };
  }
  for (const field of schema.fields) {
    if (field.oneof || rand() < 0.25) continue;
    message[field.localName] = fieldValue(rand, field, depth);
  }
  return message as unknown as MessageShape<DescMessage>;
}

function expectSameBytes(schema: DescMessage, message: MessageShape<DescMessage>): void {
  const ours = Buffer.from(encodeBinary(schema, message));
  const theirs = Buffer.from(toBinary(schema, message));
  if (!ours.equals(theirs)) throw new Error(`${schema.typeName}: ${ours.toString('hex')} is not ${theirs.toString('hex')}`);
}

test('the project defines enough message types for the comparison to mean something', () => {
  expect(MESSAGES.length).toBeGreaterThan(150);
  const kinds = new Set(MESSAGES.flatMap((m) => m.fields.map((f) => f.fieldKind)));
  expect([...kinds].sort()).toEqual(['enum', 'list', 'map', 'message', 'scalar']);
  expect(MESSAGES.some((m) => m.oneofs.length > 0)).toBe(true);
  expect(MESSAGES.some((m) => m.fields.some((f) => f.fieldKind === 'scalar' && f.presence !== 2))).toBe(true); // proto3 optional
});

test.each(MESSAGES.map((m) => [m.typeName, m] as const))('%s: the same bytes as toBinary, 30 random messages', (_name, schema) => {
  for (let seed = 1; seed <= 30; seed++) expectSameBytes(schema, randomMessage(random(seed * 7919 + schema.typeName.length), schema));
});

test('an empty message, and fields with explicit presence set to their zero value, encode as toBinary does', () => {
  for (const schema of MESSAGES) expectSameBytes(schema, create(schema));
  const invoice = create(InvoiceSchema, { orderId: '', orderDescription: '', transactionHash: '' });
  const bytes = Buffer.from(encodeBinary(InvoiceSchema, invoice));
  expect(bytes.toString('hex')).toBe('12001a00a20100'); // fields 2, 3 and 20, each present and empty
  expect(bytes.equals(Buffer.from(toBinary(InvoiceSchema, invoice)))).toBe(true);
});

test('unknown fields of a decoded message are written back after the known ones, as toBinary does', () => {
  const invoice = create(InvoiceSchema, { id: 'inv', priceAmount: '19.90', confirmationsRequired: 3 });
  // Field 1000 (a varint) and field 1001 (length-delimited): unknown to Invoice.
  const extra = Buffer.from([0xc0, 0x3e, 0x2a, 0xca, 0x3e, 0x02, 0x68, 0x69]);
  const decoded = fromBinary(InvoiceSchema, Buffer.concat([Buffer.from(toBinary(InvoiceSchema, invoice)), extra]));
  const ours = Buffer.from(encodeBinary(InvoiceSchema, decoded));
  expect(ours.subarray(ours.length - extra.length).equals(extra)).toBe(true);
  expectSameBytes(InvoiceSchema, decoded);
});

test('values out of their type refuse to encode, as toBinary refuses them', () => {
  const bad = create(InvoiceSchema, { confirmationsRequired: -1 });
  expect(() => toBinary(InvoiceSchema, bad)).toThrow(/uint32/);
  expect(() => encodeBinary(InvoiceSchema, bad)).toThrow(/invalid uint32: -1/);
  const fraction = create(InvoiceSchema, { confirmationsRequired: 1.5 });
  expect(() => encodeBinary(InvoiceSchema, fraction)).toThrow(/invalid uint32: 1.5/);
});

test('a type holding a wrapper or a Struct field (values that are not messages) is encoded by toBinary, so the bytes still agree', () => {
  // Built at run time: none of the project's types has such a field.
  const file = create(FileDescriptorProtoSchema, {
    name: 'held_otherwise.proto',
    package: 'test.v1',
    syntax: 'proto3',
    dependency: ['google/protobuf/wrappers.proto', 'google/protobuf/struct.proto'],
    messageType: [
      {
        name: 'Held',
        field: [
          { name: 'name', number: 1, type: FieldDescriptorProto_Type.MESSAGE, label: FieldDescriptorProto_Label.OPTIONAL, typeName: '.google.protobuf.StringValue', jsonName: 'name' },
          { name: 'meta', number: 2, type: FieldDescriptorProto_Type.MESSAGE, label: FieldDescriptorProto_Label.OPTIONAL, typeName: '.google.protobuf.Struct', jsonName: 'meta' },
          { name: 'note', number: 3, type: FieldDescriptorProto_Type.STRING, label: FieldDescriptorProto_Label.OPTIONAL, jsonName: 'note' },
        ],
      },
    ],
  });
  const registry = createFileRegistry(file, (name) => ({ 'google/protobuf/wrappers.proto': file_google_protobuf_wrappers, 'google/protobuf/struct.proto': file_google_protobuf_struct })[name]);
  const schema = registry.getMessage('test.v1.Held')!;
  const message = create(schema, { name: 'unwrapped', meta: { a: 1, b: ['x'] }, note: 'n' } as never);
  expect((message as unknown as { name: unknown }).name).toBe('unwrapped'); // the bare scalar, not a message
  expectSameBytes(schema, message);
  expect(fromBinary(schema, encodeBinary(schema, message))).toEqual(message);
});

/**
 * A type built at run time with every scalar type three ways — implicit presence, proto3
 * `optional`, and a list (packed where proto3 packs) — because the project's own types leave some
 * kinds out (no fixed64 or sfixed64 field anywhere): their encoding and range rules are compared
 * here, not assumed.
 */
const SCALAR_KINDS: ReadonlyArray<[string, FieldDescriptorProto_Type]> = [
  ['double', FieldDescriptorProto_Type.DOUBLE],
  ['float', FieldDescriptorProto_Type.FLOAT],
  ['int64', FieldDescriptorProto_Type.INT64],
  ['uint64', FieldDescriptorProto_Type.UINT64],
  ['int32', FieldDescriptorProto_Type.INT32],
  ['fixed64', FieldDescriptorProto_Type.FIXED64],
  ['fixed32', FieldDescriptorProto_Type.FIXED32],
  ['bool', FieldDescriptorProto_Type.BOOL],
  ['string', FieldDescriptorProto_Type.STRING],
  ['bytes', FieldDescriptorProto_Type.BYTES],
  ['uint32', FieldDescriptorProto_Type.UINT32],
  ['sfixed32', FieldDescriptorProto_Type.SFIXED32],
  ['sfixed64', FieldDescriptorProto_Type.SFIXED64],
  ['sint32', FieldDescriptorProto_Type.SINT32],
  ['sint64', FieldDescriptorProto_Type.SINT64],
];

const EVERY_SCALAR: DescMessage = (() => {
  const field = SCALAR_KINDS.flatMap(([name, type], i) => [
    { name: `${name}_value`, number: 3 * i + 1, type, label: FieldDescriptorProto_Label.OPTIONAL, jsonName: `${name}Value` },
    { name: `${name}_optional`, number: 3 * i + 2, type, label: FieldDescriptorProto_Label.OPTIONAL, jsonName: `${name}Optional`, proto3Optional: true, oneofIndex: i },
    { name: `${name}_list`, number: 3 * i + 3, type, label: FieldDescriptorProto_Label.REPEATED, jsonName: `${name}List` },
  ]);
  const file = create(FileDescriptorProtoSchema, {
    name: 'every_scalar.proto',
    package: 'test.v1',
    syntax: 'proto3',
    messageType: [{ name: 'EveryScalar', field, oneofDecl: SCALAR_KINDS.map(([name]) => ({ name: `_${name}_optional` })) }],
  });
  return createFileRegistry(file, () => undefined).getMessage('test.v1.EveryScalar')!;
})();

test('every scalar type, singular, optional and repeated (a type built at run time): the same bytes as toBinary and the same decoding, 200 random messages', () => {
  expect(new Set(EVERY_SCALAR.fields.map((f) => (f.fieldKind === 'scalar' || f.fieldKind === 'list' ? f.scalar : undefined))).size).toBe(15);
  for (let seed = 1; seed <= 200; seed++) {
    const message = randomMessage(random(seed * 6007), EVERY_SCALAR);
    expectSameBytes(EVERY_SCALAR, message);
    expect(expectSameDecoding(EVERY_SCALAR, toBinary(EVERY_SCALAR, message))).toBe('decoded');
  }
});

test('each integer type refuses what is out of its own range, as toBinary does — a value its sibling type takes included', () => {
  // Per kind: values at and just past its edges, and the edges of the kinds it could be confused with.
  const probes: Record<string, unknown[]> = {
    int32: [2 ** 31 - 1, 2 ** 31, -(2 ** 31), -(2 ** 31) - 1, 2 ** 32 - 1, 1.5],
    sint32: [2 ** 31 - 1, 2 ** 31, -(2 ** 31), -(2 ** 31) - 1, 2 ** 32 - 1],
    sfixed32: [2 ** 31 - 1, 2 ** 31, -(2 ** 31), -(2 ** 31) - 1, 2 ** 32 - 1],
    uint32: [0, -1, 2 ** 32 - 1, 2 ** 32, 2 ** 31],
    fixed32: [0, -1, 2 ** 32 - 1, 2 ** 32, 2 ** 31],
    int64: [2n ** 63n - 1n, 2n ** 63n, -(2n ** 63n), -(2n ** 63n) - 1n, 2n ** 64n - 1n],
    sint64: [2n ** 63n - 1n, 2n ** 63n, -(2n ** 63n), -(2n ** 63n) - 1n, 2n ** 64n - 1n],
    sfixed64: [2n ** 63n - 1n, 2n ** 63n, -(2n ** 63n), -(2n ** 63n) - 1n, 2n ** 64n - 1n],
    uint64: [0n, -1n, 2n ** 64n - 1n, 2n ** 64n, 2n ** 63n],
    fixed64: [0n, -1n, 2n ** 64n - 1n, 2n ** 64n, 2n ** 63n],
  };
  const outcomes = { encoded: 0, refused: 0 };
  for (const [kind, values] of Object.entries(probes)) {
    for (const value of values) {
      for (const [field, held] of [[`${kind}Value`, value], [`${kind}Optional`, value], [`${kind}List`, [value]]] as const) {
        const message = create(EVERY_SCALAR, { [field]: held } as never);
        let theirs: Buffer | undefined;
        try {
          theirs = Buffer.from(toBinary(EVERY_SCALAR, message));
        } catch {
          expect(() => encodeBinary(EVERY_SCALAR, message)).toThrow();
          outcomes.refused++;
          continue;
        }
        expect(`${kind} ${String(value)}: ${Buffer.from(encodeBinary(EVERY_SCALAR, message)).toString('hex')}`).toBe(`${kind} ${String(value)}: ${theirs.toString('hex')}`);
        outcomes.encoded++;
      }
    }
  }
  expect(outcomes.encoded).toBeGreaterThan(60);
  expect(outcomes.refused).toBeGreaterThan(40);
});

/** Both decoders on the same bytes: the same message, or both refuse. */
function expectSameDecoding(schema: DescMessage, bytes: Uint8Array): 'decoded' | 'refused' {
  let theirs: unknown;
  let theirError: unknown;
  try {
    theirs = fromBinary(schema, bytes);
  } catch (err) {
    theirError = err;
  }
  if (theirError !== undefined) {
    expect(() => decodeBinary(schema, bytes)).toThrow();
    return 'refused';
  }
  const ours = decodeBinary(schema, bytes);
  expect(ours).toEqual(theirs);
  return 'decoded';
}

test.each(MESSAGES.map((m) => [m.typeName, m] as const))('%s: decodeBinary reads what fromBinary reads, 20 random messages', (_name, schema) => {
  for (let seed = 1; seed <= 20; seed++) {
    const bytes = toBinary(schema, randomMessage(random(seed * 104729 + schema.typeName.length), schema));
    expect(expectSameDecoding(schema, bytes)).toBe('decoded');
  }
});

test('malformed and unusual input: truncated, corrupted, repeated (merged) — decodeBinary decodes or refuses exactly as fromBinary', () => {
  const outcomes = { decoded: 0, refused: 0 };
  for (const schema of MESSAGES) {
    for (let seed = 1; seed <= 8; seed++) {
      const rand = random(seed * 15485863 + schema.typeName.length);
      const bytes = Buffer.from(toBinary(schema, randomMessage(rand, schema)));
      const variants: Uint8Array[] = [Buffer.concat([bytes, bytes])]; // a message twice: singular fields merge, lists append
      if (bytes.length > 0) {
        const at = Math.floor(rand() * bytes.length);
        variants.push(bytes.subarray(0, at)); // truncated
        const flipped = Buffer.from(bytes);
        flipped[at] = flipped[at]! ^ (1 << Math.floor(rand() * 8));
        variants.push(flipped);
        variants.push(Buffer.concat([bytes.subarray(0, at), Buffer.from([Math.floor(rand() * 256)]), bytes.subarray(at)]));
      }
      for (const variant of variants) outcomes[expectSameDecoding(schema, variant)]++;
    }
  }
  // Both kinds of outcome were exercised.
  expect(outcomes.decoded).toBeGreaterThan(400);
  expect(outcomes.refused).toBeGreaterThan(80);
});

test('decodeBinary keeps unknown fields, refuses a string that is not UTF-8, and bytes fields view the input', () => {
  const invoice = create(InvoiceSchema, { id: 'inv', priceAmount: '19.90' });
  const extra = Buffer.from([0xc0, 0x3e, 0x2a, 0xca, 0x3e, 0x02, 0x68, 0x69]);
  const withUnknown = Buffer.concat([Buffer.from(toBinary(InvoiceSchema, invoice)), extra]);
  const decoded = decodeBinary(InvoiceSchema, withUnknown);
  expect(decoded).toEqual(fromBinary(InvoiceSchema, withUnknown));
  expect((decoded as unknown as { $unknown: unknown[] }).$unknown).toHaveLength(2);
  expect(Buffer.from(encodeBinary(InvoiceSchema, decoded)).equals(withUnknown)).toBe(true);

  const notUtf8 = Buffer.from([0x0a, 0x02, 0xc3, 0x28]); // id = C3 28: an invalid two-byte sequence
  expect(() => fromBinary(InvoiceSchema, notUtf8)).toThrow();
  expect(() => decodeBinary(InvoiceSchema, notUtf8)).toThrow();
  const long = 'é'.repeat(100);
  expect(decodeBinary(InvoiceSchema, toBinary(InvoiceSchema, create(InvoiceSchema, { id: long }))).id).toBe(long);
});
