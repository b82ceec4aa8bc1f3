/**
 * The `grpc-status-details-bin` trailer: a google.rpc.Status {code, message, details: Any[]}, the
 * standard way gRPC carries rich errors, so any gRPC client (grpcurl, grpc-js, Go) can read the
 * ErrorDetail our services attach. The message is three fields; it is written and read here with
 * protobuf-es' wire codec rather than generated from a vendored google/rpc proto.
 */
import { create, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import { encodeBinary } from '../protobuf-binary';
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { Code, ConnectError } from '@connectrpc/connect';

export const STATUS_DETAILS_KEY = 'grpc-status-details-bin';
const TYPE_URL_PREFIX = 'type.googleapis.com/';

interface PackedDetail {
  typeName: string;
  value: Uint8Array;
}

function packedDetailsOf(error: ConnectError): PackedDetail[] {
  return error.details.map((detail) =>
    'desc' in detail
      ? { typeName: detail.desc.typeName, value: encodeBinary(detail.desc, create(detail.desc as DescMessage, detail.value) as MessageShape<DescMessage>) }
      : { typeName: detail.type, value: detail.value },
  );
}

/** google.rpc.Status of a ConnectError, encoded. */
export function encodeStatusDetails(error: ConnectError): Uint8Array {
  const writer = new BinaryWriter();
  writer.tag(1, WireType.Varint).int32(error.code);
  if (error.rawMessage) writer.tag(2, WireType.LengthDelimited).string(error.rawMessage);
  for (const detail of packedDetailsOf(error)) {
    // google.protobuf.Any {string type_url = 1; bytes value = 2;}
    writer.tag(3, WireType.LengthDelimited).fork();
    writer.tag(1, WireType.LengthDelimited).string(`${TYPE_URL_PREFIX}${detail.typeName}`);
    writer.tag(2, WireType.LengthDelimited).bytes(detail.value);
    writer.join();
  }
  return writer.finish();
}

function decodeAny(bytes: Uint8Array): PackedDetail {
  const reader = new BinaryReader(bytes);
  let typeUrl = '';
  let value: Uint8Array = new Uint8Array(0);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === WireType.LengthDelimited) typeUrl = reader.string();
    else if (field === 2 && wireType === WireType.LengthDelimited) value = reader.bytes();
    else reader.skip(wireType);
  }
  return { typeName: typeUrl.slice(typeUrl.lastIndexOf('/') + 1), value };
}

/**
 * The ConnectError a google.rpc.Status describes; its details are kept as incoming details, so
 * `findDetails(ErrorDetailSchema)` works as for any Connect client. Undefined when it is not one.
 */
export function decodeStatusDetails(bytes: Uint8Array, fallbackMessage: string): ConnectError | undefined {
  try {
    const reader = new BinaryReader(bytes);
    let code = 0;
    let message = fallbackMessage;
    const details: PackedDetail[] = [];
    while (reader.pos < reader.len) {
      const [field, wireType] = reader.tag();
      if (field === 1 && wireType === WireType.Varint) code = reader.int32();
      else if (field === 2 && wireType === WireType.LengthDelimited) message = reader.string();
      else if (field === 3 && wireType === WireType.LengthDelimited) details.push(decodeAny(reader.bytes()));
      else reader.skip(wireType);
    }
    if (code <= 0 || code > 16) return undefined;
    const error = new ConnectError(message, code as Code);
    for (const d of details) error.details.push({ type: d.typeName, value: d.value });
    return error;
  } catch {
    return undefined;
  }
}
