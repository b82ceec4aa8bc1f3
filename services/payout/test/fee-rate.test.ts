import { feeAt, feeRateOfEstimate, formatFeeRate, parseFeeRate, withinCap, type FeeRate } from '../src/domain/fee-rate';

test('a fee rate is parsed exactly to millisatoshi per vbyte, and nothing else is a rate', () => {
  expect(parseFeeRate('12.5')).toBe(12_500n);
  expect(parseFeeRate('1.008')).toBe(1_008n);
  expect(parseFeeRate('100')).toBe(100_000n);
  for (const bad of ['0', '-1', '1.0001', 'abc', '', '1e3']) expect(parseFeeRate(bad)).toBeUndefined();
});

test('an Esplora estimate is rounded up, never down', () => {
  expect(feeRateOfEstimate(1.008)).toBe(1_008n);
  expect(feeRateOfEstimate(87.8821)).toBe(87_883n);
  expect(feeRateOfEstimate(0.1)).toBe(100n);
  expect(feeRateOfEstimate(0)).toBeUndefined();
  expect(feeRateOfEstimate(Number.NaN)).toBeUndefined();
});

test('fees are rounded up to the base unit and compared with the cap exactly', () => {
  const rate = 1_008n as FeeRate;
  expect(feeAt(rate, 141)).toBe(143n); // 142.128 → 143
  expect(feeAt(10_000n as FeeRate, 141)).toBe(1_410n);
  expect(withinCap(1_410n, 141, 10_000n as FeeRate)).toBe(true);
  expect(withinCap(1_411n, 141, 10_000n as FeeRate)).toBe(false);
  expect(formatFeeRate(12_500n as FeeRate)).toBe('12.5 sat/vB');
  expect(formatFeeRate(100_000n as FeeRate)).toBe('100 sat/vB');
});
