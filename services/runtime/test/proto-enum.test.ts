/** The one mapping between a domain's names and a proto enum (protoEnumMapping), both ways. */
import { protoEnumMapping } from '../src/rpc/proto-enum';

enum Colour {
  UNSPECIFIED = 0,
  RED = 1,
  GREEN = 2,
}

test('maps every name to its number and back; UNSPECIFIED and unknown numbers are undefined (fail closed)', () => {
  const colour = protoEnumMapping<'red' | 'green', Colour>({ red: Colour.RED, green: Colour.GREEN });
  expect(colour.toProto('red')).toBe(Colour.RED);
  expect(colour.toProto('green')).toBe(Colour.GREEN);
  expect(colour.fromProto(Colour.RED)).toBe('red');
  expect(colour.fromProto(Colour.GREEN)).toBe('green');
  expect(colour.fromProto(Colour.UNSPECIFIED)).toBeUndefined();
  expect(colour.fromProto(7 as Colour)).toBeUndefined();
});

test('a table that maps a name to UNSPECIFIED, or two names to one number, is refused when it is built', () => {
  expect(() => protoEnumMapping<'red' | 'none', Colour>({ red: Colour.RED, none: Colour.UNSPECIFIED })).toThrow(/UNSPECIFIED/);
  expect(() => protoEnumMapping<'red' | 'crimson', Colour>({ red: Colour.RED, crimson: Colour.RED })).toThrow(/red and crimson/);
});
