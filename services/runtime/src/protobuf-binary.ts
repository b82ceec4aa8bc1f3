/**
 * Protobuf binary encoding planned once per message type (docs/performance.md#protobuf-encoding).
 *
 * @bufbuild/protobuf's `toBinary` walks a message through its reflection API and writes it into
 * forked chunk lists, each string through a TextEncoder: 57 µs for one Invoice answer on an idle
 * core, a quarter of the invoice service's CPU per GetInvoice. Here the field list of each message
 * type is turned once into a plan, and a message is encoded in two passes: sizes first (each
 * nested message's and string's length noted in order), then the bytes, written straight into one
 * buffer of the exact size. The output is byte for byte `toBinary`'s (field order, presence rules,
 * packed lists, map entries, unknown fields kept; `protobuf-binary.test.ts` compares them over
 * every message type this project defines); a type using what this does not plan (groups,
 * proto2 required fields, wrapper or Struct fields) is handed to `toBinary` whole.
 */
import { create, fromBinary, protoInt64, ScalarType, toBinary, type DescField, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import { BinaryReader, getTextEncoding } from '@bufbuild/protobuf/wire';

const LENGTH_DELIMITED = 2;
const BIT64 = 1;
const BIT32 = 5;
const VARINT = 0;
/** google.protobuf.FeatureSet.FieldPresence: IMPLICIT (proto3 singular fields) and LEGACY_REQUIRED. */
const IMPLICIT = 2;
const LEGACY_REQUIRED = 3;
const INT32_MAX = 0x7fffffff;
const INT32_MIN = -0x80000000;
const UINT32_MAX = 0xffffffff;
const FLOAT32_MAX = 3.4028234663852886e38;

type Encoder = (message: MessageShape<DescMessage>) => Uint8Array;

/** Encodes `message` of type `schema` to protobuf binary, as `toBinary(schema, message)` does. */
export function encodeBinary<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): Uint8Array {
  return encoderOf(schema)(message);
}

const encoders = new WeakMap<DescMessage, Encoder>();

function encoderOf(schema: DescMessage): Encoder {
  let encoder = encoders.get(schema);
  if (!encoder) {
    const plan = planOf(schema);
    encoder = plan ? (message) => encodeWithPlan(plan, message) : (message) => toBinary(schema, message);
    encoders.set(schema, encoder);
  }
  return encoder;
}

/**
 * The scalar types as plain constants: the CommonJS build reads `ScalarType.X` through a re-export
 * getter, a function call per comparison in the loops below.
 */
const T_DOUBLE: ScalarType = ScalarType.DOUBLE;
const T_FLOAT: ScalarType = ScalarType.FLOAT;
const T_INT64: ScalarType = ScalarType.INT64;
const T_UINT64: ScalarType = ScalarType.UINT64;
const T_INT32: ScalarType = ScalarType.INT32;
const T_FIXED64: ScalarType = ScalarType.FIXED64;
const T_FIXED32: ScalarType = ScalarType.FIXED32;
const T_BOOL: ScalarType = ScalarType.BOOL;
const T_STRING: ScalarType = ScalarType.STRING;
const T_BYTES: ScalarType = ScalarType.BYTES;
const T_UINT32: ScalarType = ScalarType.UINT32;
const T_SFIXED32: ScalarType = ScalarType.SFIXED32;
const T_SFIXED64: ScalarType = ScalarType.SFIXED64;
const T_SINT32: ScalarType = ScalarType.SINT32;
const T_SINT64: ScalarType = ScalarType.SINT64;

// ---------------------------------------------------------------------------------------------
// Plans

type Kind = 'scalar' | 'list' | 'packed' | 'message' | 'messages' | 'map';

interface FieldPlan {
  kind: Kind;
  field: DescField;
  /** The property the value lives in: the field's, or its oneof's (then `oneofCase` names it). */
  property: string;
  oneofCase: string | undefined;
  /** Set only by an own, defined property (explicit presence), or only when not zero (implicit). */
  implicit: boolean;
  /** The tag's varint bytes, precomputed. */
  tag: number[];
  scalar: ScalarType;
  /** For enums with implicit presence: the first value's number, the one left unwritten. */
  enumZero: number;
  /** For message fields and map values that are messages. */
  message: MessagePlan | undefined;
  /** For maps: the key's scalar type, and the value's kind. */
  mapKey: ScalarType;
  mapValue: 'scalar' | 'message';
}

interface MessagePlan {
  fields: FieldPlan[];
}

const plans = new WeakMap<DescMessage, MessagePlan | null>();

/** The plan of a message type, or null when it (or a type inside it) needs `toBinary`. */
function planOf(schema: DescMessage): MessagePlan | null {
  if (plans.has(schema)) return plans.get(schema)!;
  const plan: MessagePlan = { fields: [] };
  plans.set(schema, plan); // before the fields: a type may contain itself
  for (const field of [...schema.fields].sort((a, b) => a.number - b.number)) {
    const fieldPlan = planField(field);
    if (!fieldPlan) {
      plans.set(schema, null);
      return null;
    }
    plan.fields.push(fieldPlan);
  }
  return plan;
}

/**
 * Message types @bufbuild/protobuf holds as something else than a message in some fields: the
 * wrappers (a singular field holds the bare scalar) and Struct (a plain JSON object). A type that
 * refers to one is left to `toBinary`.
 */
const HELD_OTHERWISE = new Set(
  ['DoubleValue', 'FloatValue', 'Int64Value', 'UInt64Value', 'Int32Value', 'UInt32Value', 'BoolValue', 'StringValue', 'BytesValue', 'Struct'].map((name) => `google.protobuf.${name}`),
);

function planField(field: DescField): FieldPlan | null {
  if (field.presence === LEGACY_REQUIRED) return null;
  if (field.message && HELD_OTHERWISE.has(field.message.typeName)) return null;
  const base = {
    field,
    property: field.oneof ? field.oneof.localName : field.localName,
    oneofCase: field.oneof ? field.localName : undefined,
    implicit: !field.oneof && field.presence === IMPLICIT,
    scalar: T_INT32,
    enumZero: 0,
    message: undefined,
    mapKey: T_STRING,
    mapValue: 'scalar' as const,
  };
  switch (field.fieldKind) {
    case 'scalar':
      return { ...base, kind: 'scalar', scalar: field.scalar, tag: varintBytes(tagOf(field.number, wireTypeOf(field.scalar))) };
    case 'enum':
      return { ...base, kind: 'scalar', enumZero: field.enum.values[0]?.number ?? 0, tag: varintBytes(tagOf(field.number, VARINT)) };
    case 'message': {
      if (field.delimitedEncoding) return null;
      const message = planOf(field.message);
      if (!message) return null;
      return { ...base, kind: 'message', message, tag: varintBytes(tagOf(field.number, LENGTH_DELIMITED)) };
    }
    case 'list':
      if (field.listKind === 'message') {
        if (field.delimitedEncoding) return null;
        const message = planOf(field.message);
        if (!message) return null;
        return { ...base, kind: 'messages', message, tag: varintBytes(tagOf(field.number, LENGTH_DELIMITED)) };
      }
      {
        const scalar = field.listKind === 'scalar' ? field.scalar : T_INT32;
        if (field.packed) return { ...base, kind: 'packed', scalar, tag: varintBytes(tagOf(field.number, LENGTH_DELIMITED)) };
        return { ...base, kind: 'list', scalar, tag: varintBytes(tagOf(field.number, wireTypeOf(scalar))) };
      }
    case 'map': {
      const tag = varintBytes(tagOf(field.number, LENGTH_DELIMITED));
      if (field.mapKind === 'message') {
        const message = planOf(field.message);
        if (!message) return null;
        return { ...base, kind: 'map', mapKey: field.mapKey, mapValue: 'message', message, tag };
      }
      return { ...base, kind: 'map', mapKey: field.mapKey, scalar: field.mapKind === 'scalar' ? field.scalar : T_INT32, tag };
    }
  }
}

function tagOf(fieldNumber: number, wireType: number): number {
  return ((fieldNumber << 3) | wireType) >>> 0;
}

function wireTypeOf(scalar: ScalarType): number {
  switch (scalar) {
    case T_BYTES:
    case T_STRING:
      return LENGTH_DELIMITED;
    case T_DOUBLE:
    case T_FIXED64:
    case T_SFIXED64:
      return BIT64;
    case T_FIXED32:
    case T_SFIXED32:
    case T_FLOAT:
      return BIT32;
    default:
      return VARINT;
  }
}

function varintBytes(value: number): number[] {
  const bytes: number[] = [];
  while (value > 0x7f) {
    bytes.push((value & 0x7f) | 0x80);
    value >>>= 7;
  }
  bytes.push(value);
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Encoding: a size pass, then a write pass reading the lengths the first noted, in the same order.

type Fields = Record<string, unknown>;
interface Unknown {
  no: number;
  wireType: number;
  data: Uint8Array;
}

interface Output {
  buf: Buffer;
  pos: number;
  /** Lengths noted by the size pass (nested messages, packed lists, map entries, strings). */
  lengths: number[];
  next: number;
}

function encodeWithPlan(plan: MessagePlan, message: MessageShape<DescMessage>): Uint8Array {
  const lengths: number[] = [];
  const size = sizeOfMessage(plan, message as unknown as Fields, lengths);
  const out: Output = { buf: Buffer.allocUnsafe(size), pos: 0, lengths, next: 0 };
  writeMessage(plan, message as unknown as Fields, out);
  if (out.pos !== size) throw new Error(`protobuf encoding: wrote ${out.pos} bytes of ${size}`);
  return out.buf;
}

/** The field's value if it is to be written (the rules of @bufbuild/protobuf's `isSet`), else undefined. */
function valueToWrite(plan: FieldPlan, message: Fields): unknown {
  const value = message[plan.property];
  if (plan.oneofCase !== undefined) {
    const oneof = value as { case: string | undefined; value?: unknown };
    return oneof.case === plan.oneofCase ? oneof.value : undefined;
  }
  if (!plan.implicit) return value !== undefined && Object.prototype.hasOwnProperty.call(message, plan.property) ? value : undefined;
  switch (plan.kind) {
    case 'list':
    case 'packed':
    case 'messages':
      return (value as unknown[]).length > 0 ? value : undefined;
    case 'map':
      return Object.keys(value as object).length > 0 ? value : undefined;
    case 'scalar':
      if (plan.field.fieldKind === 'enum') return value !== plan.enumZero ? value : undefined;
      return isZero(plan.scalar, value) ? undefined : value;
    case 'message':
      return value; // a message field always has explicit presence
  }
}

function isZero(scalar: ScalarType, value: unknown): boolean {
  switch (scalar) {
    case T_BOOL:
      return value === false;
    case T_STRING:
      return value === '';
    case T_BYTES:
      return value instanceof Uint8Array && value.byteLength === 0;
    case T_DOUBLE:
    case T_FLOAT:
      return Object.is(value, 0);
    default:
      // eslint-disable-next-line eqeqeq -- as @bufbuild/protobuf: 0, 0n and "0" are all zero
      return value == 0;
  }
}

function sizeOfMessage(plan: MessagePlan, message: Fields, lengths: number[]): number {
  let size = 0;
  for (const field of plan.fields) {
    const value = valueToWrite(field, message);
    if (value === undefined) continue;
    switch (field.kind) {
      case 'scalar':
        size += field.tag.length + sizeOfScalar(field.scalar, value, lengths);
        break;
      case 'list':
        for (const item of value as unknown[]) size += field.tag.length + sizeOfScalar(field.scalar, item, lengths);
        break;
      case 'packed': {
        const at = lengths.push(0) - 1;
        let inner = 0;
        for (const item of value as unknown[]) inner += sizeOfScalar(field.scalar, item, lengths);
        lengths[at] = inner;
        size += field.tag.length + varintSize(inner) + inner;
        break;
      }
      case 'message':
        size += field.tag.length + sizeOfNested(field.message!, value as Fields, lengths);
        break;
      case 'messages':
        for (const item of value as Fields[]) size += field.tag.length + sizeOfNested(field.message!, item, lengths);
        break;
      case 'map':
        for (const [key, item] of Object.entries(value as Fields)) {
          const at = lengths.push(0) - 1;
          let entry = 1 + sizeOfScalar(field.mapKey, mapKeyOf(field.mapKey, key), lengths);
          if (field.mapValue === 'message') entry += 1 + sizeOfNested(field.message!, item as Fields, lengths);
          else entry += 1 + sizeOfScalar(field.scalar, item, lengths);
          lengths[at] = entry;
          size += field.tag.length + varintSize(entry) + entry;
        }
        break;
    }
  }
  for (const { no, wireType, data } of unknownOf(message)) size += varintSize(tagOf(no, wireType)) + data.byteLength;
  return size;
}

/** A nested message's size with its length prefix; its own length is noted before its insides. */
function sizeOfNested(plan: MessagePlan, message: Fields, lengths: number[]): number {
  const at = lengths.push(0) - 1;
  const inner = sizeOfMessage(plan, message, lengths);
  lengths[at] = inner;
  return varintSize(inner) + inner;
}

function writeMessage(plan: MessagePlan, message: Fields, out: Output): void {
  for (const field of plan.fields) {
    const value = valueToWrite(field, message);
    if (value === undefined) continue;
    switch (field.kind) {
      case 'scalar':
        writeTag(field.tag, out);
        writeScalar(field.scalar, value, out);
        break;
      case 'list':
        for (const item of value as unknown[]) {
          writeTag(field.tag, out);
          writeScalar(field.scalar, item, out);
        }
        break;
      case 'packed':
        writeTag(field.tag, out);
        writeVarint32(out.lengths[out.next++]!, out);
        for (const item of value as unknown[]) writeScalar(field.scalar, item, out);
        break;
      case 'message':
        writeTag(field.tag, out);
        writeNested(field.message!, value as Fields, out);
        break;
      case 'messages':
        for (const item of value as Fields[]) {
          writeTag(field.tag, out);
          writeNested(field.message!, item, out);
        }
        break;
      case 'map':
        for (const [key, item] of Object.entries(value as Fields)) {
          writeTag(field.tag, out);
          writeVarint32(out.lengths[out.next++]!, out);
          out.buf[out.pos++] = tagOf(1, wireTypeOf(field.mapKey));
          writeScalar(field.mapKey, mapKeyOf(field.mapKey, key), out);
          if (field.mapValue === 'message') {
            out.buf[out.pos++] = tagOf(2, LENGTH_DELIMITED);
            writeNested(field.message!, item as Fields, out);
          } else {
            out.buf[out.pos++] = tagOf(2, wireTypeOf(field.scalar));
            writeScalar(field.scalar, item, out);
          }
        }
        break;
    }
  }
  for (const { no, wireType, data } of unknownOf(message)) {
    writeVarint32(tagOf(no, wireType), out);
    out.buf.set(data, out.pos);
    out.pos += data.byteLength;
  }
}

function writeNested(plan: MessagePlan, message: Fields, out: Output): void {
  writeVarint32(out.lengths[out.next++]!, out);
  writeMessage(plan, message, out);
}

function unknownOf(message: Fields): readonly Unknown[] {
  return (message.$unknown as Unknown[] | undefined) ?? [];
}

/** A map's key as its type's value: object keys are strings (as @bufbuild/protobuf's maps keep them). */
function mapKeyOf(scalar: ScalarType, key: string): unknown {
  switch (scalar) {
    case T_BOOL:
      return key === 'true';
    case T_STRING:
    case T_INT64: // protoInt64 takes the decimal string as it is
    case T_UINT64:
    case T_SINT64:
    case T_FIXED64:
    case T_SFIXED64:
      return key;
    default:
      return Number(key);
  }
}

// ---------------------------------------------------------------------------------------------
// Scalars: sizes and writes, with @bufbuild/protobuf's range checks.

function sizeOfScalar(scalar: ScalarType, value: unknown, lengths: number[]): number {
  switch (scalar) {
    case T_STRING: {
      const length = Buffer.byteLength(value as string, 'utf8');
      lengths.push(length);
      return varintSize(length) + length;
    }
    case T_BYTES: {
      const length = (value as Uint8Array).byteLength;
      return varintSize(length) + length;
    }
    case T_BOOL:
      return 1;
    case T_INT32: {
      const n = int32(value);
      return n < 0 ? 10 : varintSize(n);
    }
    case T_UINT32:
      return varintSize(uint32(value));
    case T_SINT32: {
      const n = int32(value);
      return varintSize(((n << 1) ^ (n >> 31)) >>> 0);
    }
    case T_INT64: {
      const { lo, hi } = int64Parts(value, false);
      return varint64Size(lo, hi);
    }
    case T_UINT64: {
      const { lo, hi } = int64Parts(value, true);
      return varint64Size(lo, hi);
    }
    case T_SINT64: {
      const { lo, hi } = zigzag64(value);
      return varint64Size(lo, hi);
    }
    case T_DOUBLE:
    case T_FIXED64:
    case T_SFIXED64:
      return 8;
    case T_FLOAT:
    case T_FIXED32:
    case T_SFIXED32:
      return 4;
    default:
      throw new Error(`protobuf encoding: unknown scalar type ${scalar}`);
  }
}

function writeScalar(scalar: ScalarType, value: unknown, out: Output): void {
  switch (scalar) {
    case T_STRING: {
      const length = out.lengths[out.next++]!;
      writeVarint32(length, out);
      writeUtf8(value as string, length, out);
      return;
    }
    case T_BYTES: {
      const bytes = value as Uint8Array;
      writeVarint32(bytes.byteLength, out);
      out.buf.set(bytes, out.pos);
      out.pos += bytes.byteLength;
      return;
    }
    case T_BOOL:
      out.buf[out.pos++] = value ? 1 : 0;
      return;
    case T_INT32: {
      const n = int32(value);
      if (n >= 0) writeVarint32(n, out);
      else writeVarint64(n >>> 0, 0xffffffff, out); // a negative int32 is sign-extended to ten bytes
      return;
    }
    case T_UINT32:
      writeVarint32(uint32(value), out);
      return;
    case T_SINT32: {
      const n = int32(value);
      writeVarint32(((n << 1) ^ (n >> 31)) >>> 0, out);
      return;
    }
    case T_INT64: {
      const { lo, hi } = int64Parts(value, false);
      writeVarint64(lo, hi, out);
      return;
    }
    case T_UINT64: {
      const { lo, hi } = int64Parts(value, true);
      writeVarint64(lo, hi, out);
      return;
    }
    case T_SINT64: {
      const { lo, hi } = zigzag64(value);
      writeVarint64(lo, hi, out);
      return;
    }
    case T_FIXED64:
    case T_SFIXED64: {
      const { lo, hi } = int64Parts(value, scalar === T_FIXED64);
      // The halves come signed (protoInt64) or, on the small-bigint path, unsigned: the same bits.
      out.buf.writeUInt32LE(lo >>> 0, out.pos);
      out.buf.writeUInt32LE(hi >>> 0, out.pos + 4);
      out.pos += 8;
      return;
    }
    case T_DOUBLE:
      out.buf.writeDoubleLE(Number(value), out.pos);
      out.pos += 8;
      return;
    case T_FLOAT:
      out.buf.writeFloatLE(float32(value), out.pos);
      out.pos += 4;
      return;
    case T_FIXED32:
      out.buf.writeUInt32LE(uint32(value), out.pos);
      out.pos += 4;
      return;
    case T_SFIXED32:
      out.buf.writeInt32LE(int32(value), out.pos);
      out.pos += 4;
      return;
    default:
      throw new Error(`protobuf encoding: unknown scalar type ${scalar}`);
  }
}

/** Short ASCII strings byte by byte (a native call costs more than the copy); the rest by Buffer. */
function writeUtf8(value: string, length: number, out: Output): void {
  if (length === value.length && length <= 64) {
    const { buf } = out;
    let pos = out.pos;
    for (let i = 0; i < length; i++) buf[pos++] = value.charCodeAt(i);
    out.pos = pos;
    return;
  }
  out.pos += out.buf.write(value, out.pos, length, 'utf8');
}

function writeTag(tag: readonly number[], out: Output): void {
  for (let i = 0; i < tag.length; i++) out.buf[out.pos++] = tag[i]!;
}

function writeVarint32(value: number, out: Output): void {
  const { buf } = out;
  while (value > 0x7f) {
    buf[out.pos++] = (value & 0x7f) | 0x80;
    value >>>= 7;
  }
  buf[out.pos++] = value;
}

function writeVarint64(lo: number, hi: number, out: Output): void {
  lo >>>= 0;
  hi >>>= 0;
  const { buf } = out;
  while (hi > 0 || lo > 0x7f) {
    buf[out.pos++] = (lo & 0x7f) | 0x80;
    lo = ((lo >>> 7) | (hi << 25)) >>> 0;
    hi >>>= 7;
  }
  buf[out.pos++] = lo;
}

function varintSize(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  return 5;
}

function varint64Size(lo: number, hi: number): number {
  lo >>>= 0;
  hi >>>= 0;
  let size = 1;
  while (hi > 0 || lo > 0x7f) {
    lo = ((lo >>> 7) | (hi << 25)) >>> 0;
    hi >>>= 7;
    size++;
  }
  return size;
}

/** The two 32-bit halves of a 64-bit integer; a bigint in [0, 2^32) (a Timestamp's seconds) without BigInt arithmetic. */
function int64Parts(value: unknown, unsigned: boolean): { lo: number; hi: number } {
  if (typeof value === 'bigint' && value >= 0n && value <= 0xffffffffn) return { lo: Number(value), hi: 0 };
  const int64 = value as bigint | string | number;
  return unsigned ? protoInt64.uEnc(int64) : protoInt64.enc(int64);
}

function zigzag64(value: unknown): { lo: number; hi: number } {
  const { lo, hi } = int64Parts(value, false);
  const sign = hi >> 31;
  return { lo: (lo << 1) ^ sign, hi: ((hi << 1) | (lo >>> 31)) ^ sign };
}

function int32(value: unknown): number {
  const n = typeof value === 'string' ? Number(value) : value;
  if (typeof n !== 'number') throw new Error(`invalid int32: ${typeof value}`);
  if (!Number.isInteger(n) || n > INT32_MAX || n < INT32_MIN) throw new Error(`invalid int32: ${n}`);
  return n;
}

function uint32(value: unknown): number {
  const n = typeof value === 'string' ? Number(value) : value;
  if (typeof n !== 'number') throw new Error(`invalid uint32: ${typeof value}`);
  if (!Number.isInteger(n) || n > UINT32_MAX || n < 0) throw new Error(`invalid uint32: ${n}`);
  return n;
}

function float32(value: unknown): number {
  const n = typeof value === 'string' ? Number(value) : value;
  if (typeof n !== 'number') throw new Error(`invalid float32: ${typeof value}`);
  if (Number.isFinite(n) && (n > FLOAT32_MAX || n < -FLOAT32_MAX)) throw new Error(`invalid float32: ${n}`);
  return n;
}

// ---------------------------------------------------------------------------------------------
// Decoding: @bufbuild/protobuf's `fromBinary`, read with the library's own BinaryReader (so a
// malformed input fails here exactly where it fails there), into the message `create` makes; what
// is saved is its reflection layer.

/** Decodes protobuf binary into a message of type `schema`, as `fromBinary(schema, bytes)` does. */
export function decodeBinary<Desc extends DescMessage>(schema: Desc, bytes: Uint8Array): MessageShape<Desc> {
  const plan = decodePlanOf(schema);
  if (!plan) return fromBinary(schema, bytes);
  const input: Input = { reader: new BinaryReader(bytes), depth: 0 };
  const message = create(schema) as unknown as Fields;
  readMessage(plan, message, input, bytes.length);
  return message as unknown as MessageShape<Desc>;
}

interface DecodePlan {
  schema: DescMessage;
  /** Field plans by field number (a sparse array: field numbers here are small). */
  byNumber: Array<DecodeField | undefined>;
}

interface DecodeField extends Omit<FieldPlan, 'message'> {
  message: DecodePlan | undefined;
  /** proto3 strings are checked to be UTF-8 (`fromBinary` refuses them otherwise). */
  strict: boolean;
  /** For lists: packed encodings are read whatever the field's own `packed` says. */
  packable: boolean;
}

const decodePlans = new WeakMap<DescMessage, DecodePlan | null>();
const PROTO3 = 999; // google.protobuf.Edition.EDITION_PROTO3

/** The decoding plan of a message type, or null when it (or a type inside it) needs `fromBinary`. */
function decodePlanOf(schema: DescMessage): DecodePlan | null {
  if (decodePlans.has(schema)) return decodePlans.get(schema)!;
  // proto2 and editions keep defaults and presence in a message's prototype: left to fromBinary.
  if (schema.file.edition !== PROTO3 || !planOf(schema)) {
    decodePlans.set(schema, null);
    return null;
  }
  const plan: DecodePlan = { schema, byNumber: [] };
  decodePlans.set(schema, plan);
  for (const field of planOf(schema)!.fields) {
    const f = field.field;
    if ((f.fieldKind === 'scalar' || (f.fieldKind === 'list' && f.listKind === 'scalar')) && f.longAsString) {
      decodePlans.set(schema, null);
      return null;
    }
    if ((f.fieldKind === 'enum' || (f.fieldKind === 'list' && f.listKind === 'enum') || (f.fieldKind === 'map' && f.mapKind === 'enum')) && !f.enum.open) {
      decodePlans.set(schema, null);
      return null;
    }
    let message: DecodePlan | undefined;
    if (f.message) {
      const nested = decodePlanOf(f.message);
      if (!nested) {
        decodePlans.set(schema, null);
        return null;
      }
      message = nested;
    }
    if (f.number > 10_000) {
      decodePlans.set(schema, null);
      return null;
    }
    plan.byNumber[f.number] = {
      ...field,
      message,
      strict: f.utf8Validation,
      packable: field.scalar !== T_STRING && field.scalar !== T_BYTES,
    };
  }
  return plan;
}

interface Input {
  reader: BinaryReader;
  depth: number;
}

const RECURSION_LIMIT = 100;

function readMessage(plan: DecodePlan, message: Fields, input: Input, length: number): void {
  if (++input.depth > RECURSION_LIMIT) throw new Error(`cannot decode ${plan.schema.typeName} from binary: maximum recursion depth of ${RECURSION_LIMIT} reached`);
  const { reader } = input;
  const end = reader.pos + length;
  const unknown: Unknown[] = (message.$unknown as Unknown[] | undefined) ?? [];
  while (reader.pos < end) {
    const [fieldNo, wireType] = reader.tag();
    const field = plan.byNumber[fieldNo];
    if (!field) {
      unknown.push({ no: fieldNo, wireType, data: reader.skip(wireType, fieldNo, RECURSION_LIMIT - input.depth) });
      continue;
    }
    readField(field, message, input, wireType);
  }
  if (unknown.length > 0) message.$unknown = unknown;
  input.depth--;
}

function readField(field: DecodeField, message: Fields, input: Input, wireType: number): void {
  switch (field.kind) {
    case 'scalar':
      setValue(field, message, field.field.fieldKind === 'enum' ? input.reader.int32() : readScalar(field.scalar, input, field.strict));
      return;
    case 'message':
    case 'messages': {
      const length = input.reader.uint32();
      if (field.kind === 'messages') {
        const item = create(field.message!.schema) as unknown as Fields;
        readMessage(field.message!, item, input, length);
        (message[field.property] as Fields[]).push(item);
        return;
      }
      // A singular message seen again is merged into the first.
      const existing = field.oneofCase !== undefined ? oneofValue(field, message) : message[field.property];
      const target = (existing as Fields | undefined) ?? (create(field.message!.schema) as unknown as Fields);
      readMessage(field.message!, target, input, length);
      setValue(field, message, target);
      return;
    }
    case 'list':
    case 'packed': {
      const list = message[field.property] as unknown[];
      const read = () => (field.field.fieldKind === 'list' && field.field.listKind === 'enum' ? input.reader.int32() : readScalar(field.scalar, input, field.strict));
      if (!(wireType === LENGTH_DELIMITED && field.packable)) {
        list.push(read());
        return;
      }
      const end = input.reader.uint32() + input.reader.pos;
      while (input.reader.pos < end) list.push(read());
      return;
    }
    case 'map':
      readMapEntry(field, message[field.property] as Fields, input);
      return;
  }
}

function oneofValue(field: DecodeField, message: Fields): unknown {
  const oneof = message[field.property] as { case: string | undefined; value?: unknown };
  return oneof.case === field.oneofCase ? oneof.value : undefined;
}

function setValue(field: DecodeField, message: Fields, value: unknown): void {
  if (field.oneofCase !== undefined) message[field.property] = { case: field.oneofCase, value };
  else message[field.property] = value;
}

/** A map entry: key field 1, value field 2, read as `fromBinary` reads them (other numbers are not skipped there either). */
function readMapEntry(field: DecodeField, map: Fields, input: Input): void {
  const { reader } = input;
  const length = reader.uint32();
  const end = reader.pos + length;
  let key: unknown;
  let value: unknown;
  while (reader.pos < end) {
    const [fieldNo] = reader.tag();
    if (fieldNo === 1) key = readScalar(field.mapKey, input, field.strict);
    else if (fieldNo === 2) {
      if (field.mapValue === 'message') {
        const entryLength = reader.uint32();
        const item = create(field.message!.schema) as unknown as Fields;
        readMessage(field.message!, item, input, entryLength);
        value = item;
      } else if (field.field.fieldKind === 'map' && field.field.mapKind === 'enum') value = reader.int32();
      else value = readScalar(field.scalar, input, field.strict);
    }
  }
  if (key === undefined) key = zeroOf(field.mapKey);
  if (value === undefined) {
    const f = field.field;
    if (field.mapValue === 'message') value = create(field.message!.schema);
    else if (f.fieldKind === 'map' && f.mapKind === 'enum') value = f.enum.values[0]!.number;
    else value = zeroOf(field.scalar);
  }
  map[typeof key === 'string' || typeof key === 'number' ? key : String(key)] = value;
}

function zeroOf(scalar: ScalarType): unknown {
  switch (scalar) {
    case T_STRING:
      return '';
    case T_BOOL:
      return false;
    case T_BYTES:
      return new Uint8Array(0);
    case T_INT64:
    case T_UINT64:
    case T_SINT64:
    case T_FIXED64:
    case T_SFIXED64:
      return protoInt64.zero;
    default:
      return 0;
  }
}

/** Short ASCII text byte by byte (a TextDecoder call costs more than the loop); undefined otherwise. */
function shortAscii(bytes: Uint8Array): string | undefined {
  if (bytes.length > 64) return undefined;
  let text = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b >= 0x80) return undefined;
    text += String.fromCharCode(b);
  }
  return text;
}

/** A scalar of `scalar`'s type, through the library's reader (its semantics, its refusals). */
function readScalar(scalar: ScalarType, input: Input, strict: boolean): unknown {
  const { reader } = input;
  switch (scalar) {
    case T_STRING: {
      const bytes = reader.bytes();
      return shortAscii(bytes) ?? getTextEncoding().decodeUtf8(bytes, strict);
    }
    case T_BYTES:
      return reader.bytes();
    case T_BOOL:
      return reader.bool();
    case T_INT32:
      return reader.int32();
    case T_UINT32:
      return reader.uint32();
    case T_SINT32:
      return reader.sint32();
    case T_INT64:
      return reader.int64();
    case T_UINT64:
      return reader.uint64();
    case T_SINT64:
      return reader.sint64();
    case T_FIXED32:
      return reader.fixed32();
    case T_SFIXED32:
      return reader.sfixed32();
    case T_FIXED64:
      return reader.fixed64();
    case T_SFIXED64:
      return reader.sfixed64();
    case T_FLOAT:
      return reader.float();
    case T_DOUBLE:
      return reader.double();
    default:
      throw new Error(`protobuf decoding: unknown scalar type ${scalar}`);
  }
}
