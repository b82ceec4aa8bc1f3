/**
 * The two-way mapping between a domain's names and a proto enum, from one table: to the proto
 * number for every name, and back to the name for a number, failing closed — UNSPECIFIED (0) and
 * a number this code does not know are undefined, never taken for some name; the caller refuses
 * them (docs/accounting.md#fail-closed).
 */
export interface ProtoEnumMapping<Name extends string, Proto extends number> {
  toProto(name: Name): Proto;
  /** The name of a proto number; undefined for UNSPECIFIED or an unknown number. */
  fromProto(value: Proto): Name | undefined;
}

export function protoEnumMapping<Name extends string, Proto extends number>(table: Readonly<Record<Name, Proto>>): ProtoEnumMapping<Name, Proto> {
  const byProto = new Map<number, Name>();
  for (const [name, value] of Object.entries(table) as [Name, Proto][]) {
    if (value === 0) throw new Error(`proto enum mapping: ${name} maps to UNSPECIFIED (0)`);
    if (byProto.has(value)) throw new Error(`proto enum mapping: ${byProto.get(value)} and ${name} map to the same number ${value}`);
    byProto.set(value, name);
  }
  return {
    toProto: (name) => table[name],
    fromProto: (value) => byProto.get(value),
  };
}
