/** What a processor leaves alone for a while (services/payout/src/processor/left-alone.ts). */
import { LeftAlone } from '../src/processor/left-alone';

test('left alone until its time, listed by prefix; what expired is forgotten, also without being listed', () => {
  const left = new LeftAlone();
  left.leave('payout:a', 1_000, 0);
  left.leave('sweep:x', 1_000, 0);
  expect(left.isLeft('payout:a', 999)).toBe(true);
  expect(left.isLeft('payout:a', 1_000)).toBe(false);
  expect(left.keys('payout:', 500)).toEqual(['a']);
  expect(left.keys('', 2_000)).toEqual([]);
  // A long-running processor's keys asked about no more do not pile up.
  const many = new LeftAlone();
  for (let i = 0; i < 10_000; i++) many.leave(`payout:${i}`, 1_000, i * 10);
  expect((many as unknown as { until: Map<string, number> }).until.size).toBeLessThanOrEqual(1_024);
  // Those left at 99,010 … 99,990 for a second are still left at 100,000.
  expect(many.keys('payout:', 100_000)).toHaveLength(99);
});
