/** Jest runs TypeScript through swc (no type-check here: `npm run check` runs tsc on its own). */
const swc = ['@swc/jest', { jsc: { target: 'es2023', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } }];

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  testMatch: [
    '<rootDir>/test/**/*.test.ts',
    '<rootDir>/services/*/test/**/*.test.ts',
    '<rootDir>/gateway/test/**/*.test.ts',
    '<rootDir>/deploy/local/test/**/*.test.ts',
  ],
  // Timing tests run on their own afterwards (jest.perf.config.js): CPU time measured while the
  // other worker's end-to-end file loads both cores is inflated by the contention, not the code.
  // test/image runs from the built image, by `npm run test:image` (jest.image.config.js).
  testPathIgnorePatterns: ['/node_modules/', '\\.perf\\.test\\.ts$', '<rootDir>/test/image/'],
  transform: { '^.+\\.(t|j|mj)sx?$': swc },
  // ESM-only dependencies are transformed to CommonJS for Jest's module system.
  transformIgnorePatterns: ['/node_modules/(?!(@noble|@scure|@seriousme|jose|micro-packed|eventsource-parser)/)'],
  moduleNameMapper: {
    '^@coinvoice/runtime$': '<rootDir>/services/runtime/src/index.ts',
    '^@coinvoice/runtime/gen/(.*)$': '<rootDir>/services/runtime/src/gen/$1',
    '^@coinvoice/runtime/migrate-service$': '<rootDir>/services/runtime/src/migrate-service.ts',
    '^@coinvoice/domain/(.*)$': '<rootDir>/services/domain/src/$1',
    '^@coinvoice/chains/(.*)$': '<rootDir>/services/chains/src/$1',
    '^@coinvoice/client$': '<rootDir>/packages/client/src/index.ts',
  },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 60_000,
  // Two files at a time: most of an end-to-end file's time is spent waiting on processes it
  // started, so this halves the suite's wall time on a 2-core machine (Jest's default is 1 worker
  // there, in band).
  maxWorkers: 2,
};
