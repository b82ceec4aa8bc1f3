/**
 * `npm run test:image` (test/image/run.sh): the system run from the built image, one file, after
 * test/image/prepare.sh has built the image. Not part of `jest` (it needs podman and the image).
 */
const base = require('./jest.config.js');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/image/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  maxWorkers: 1,
};
