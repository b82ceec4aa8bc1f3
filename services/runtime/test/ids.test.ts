/** timeOrderedUuid (docs/performance.md#cost-as-data-grows): RFC 9562 version 7, ordered by time, unguessable. */
import { isUuid } from '../src/validation';
import { timeOrderedUuid } from '../src/ids';

test('a version-7 UUID with the RFC variant and the millisecond time in its first 48 bits', () => {
  const at = Date.UTC(2026, 10, 27, 1, 2, 3, 456);
  const id = timeOrderedUuid(at);
  expect(isUuid(id)).toBe(true);
  expect(id[14]).toBe('7');
  expect(['8', '9', 'a', 'b']).toContain(id[19]);
  expect(parseInt(id.replace(/-/g, '').slice(0, 12), 16)).toBe(at);
});

test('ids of later milliseconds sort after earlier ones; ids of one millisecond differ', () => {
  const ids = Array.from({ length: 200 }, (_, i) => timeOrderedUuid(1_800_000_000_000 + i));
  expect([...ids].sort()).toEqual(ids);
  const sameMs = new Set(Array.from({ length: 1000 }, () => timeOrderedUuid(1_800_000_000_000)));
  expect(sameMs.size).toBe(1000);
});
