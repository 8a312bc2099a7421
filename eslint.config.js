import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

// The layers' import boundaries (README, "Architecture"). An allow-list is a regex that
// matches every import except the allowed ones (gitignore-style `!` patterns cannot re-allow
// below a forbidden `*`). tests/boundaries.test.ts shows each rule failing across its boundary.
const NODE_BUILTINS = ['node:*', 'fs', 'path', 'crypto', 'http', 'https', 'net', 'os', 'child_process', 'stream'];
const DEV_TOOLING = {
  group: ['**/stack/*', '**/scripts/**'],
  message: 'production code never imports the local stack or scripts (development tooling)',
};

export const boundaries = [
  {
    // Workflows run in Temporal's deterministic sandbox: they import @temporalio/workflow,
    // their contracts, and the types of the activities; nothing else.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(?!@temporalio/workflow$|\\./[^/]+$|\\.\\./infra/temporal/contracts/[^/]+$|\\.\\./activities/[^/]+$)',
              message: 'workflows import only @temporalio/workflow, contracts (infra/temporal/contracts) and activity types',
            },
            { group: NODE_BUILTINS, message: 'workflows must be deterministic' },
            { group: ['../activities/*'], allowTypeImports: true, message: 'workflows import only the *types* of activities' },
          ],
        },
      ],
    },
  },
  {
    // Contracts are shared by the sandbox, the worker and the client: they import only each
    // other's types.
    files: ['infra/temporal/contracts/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: '^(?!\\./[^/]+$)', message: 'contracts import only other contracts' }] }],
    },
  },
  {
    // infra/ is the bottom layer: adapters and contracts. It never reaches up.
    files: ['infra/**/*.ts'],
    ignores: ['infra/temporal/contracts/**', 'infra/stack/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/api/**', '**/workflows/**', '**/activities/**', '**/workers/**'],
              message: 'infra/ imports no api/, workflows/, activities/ or workers/',
            },
            DEV_TOOLING,
          ],
        },
      ],
    },
  },
  {
    // Use-cases know no transport: no HTTP framework, no surface.
    files: ['api/usecases/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['express', 'busboy', 'pino-http', '../rest/*', '../cli/*', '**/workflows/**', '**/activities/**', '**/workers/**'],
              message: 'use-cases know no transport and no workflow code',
            },
            DEV_TOOLING,
          ],
        },
      ],
    },
  },
  {
    files: ['api/**/*.ts', 'activities/**/*.ts', 'workers/**/*.ts'],
    ignores: ['api/usecases/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: [DEV_TOOLING] }] },
  },
];

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'web/dist/', 'data/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly', fetch: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  ...boundaries,
  {
    files: ['tests/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-non-null-assertion': 'off' },
  },
  prettier,
);
