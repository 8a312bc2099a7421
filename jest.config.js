// jest runs the TypeScript sources as ESM (kubo-rpc-client and its dependencies are
// import-only). `npm test` runs it through stack/run-tests.ts, which starts the
// isolated stack first and passes its endpoints in STUPA_TEST_* variables.
/** @type {import('jest').Config} */
export default {
  preset: 'ts-jest/presets/default-esm',
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
  testMatch: ['<rootDir>/tests/**/*.test.ts'],
  testTimeout: 60000,
};
