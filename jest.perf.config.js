/**
 * The timing tests (`*.perf.test.ts`), run by `npm test` after the main suite, one file at a time,
 * so what they measure is the code and not the other Jest worker's load.
 */
const base = require('./jest.config.js');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  testMatch: base.testMatch.map((pattern) => pattern.replace('*.test.ts', '*.perf.test.ts')),
  testPathIgnorePatterns: ['/node_modules/'],
  maxWorkers: 1,
};
