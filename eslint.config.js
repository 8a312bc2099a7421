import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

// The layers' import boundaries (docs/architecture/README.md). An allow-list is a regex that
// matches every import except the allowed ones (gitignore-style `!` patterns cannot re-allow
// below a forbidden `*`). tests/unit/boundaries.test.ts shows each rule failing across its boundary.
const NODE_BUILTINS = ['node:*', 'fs', 'path', 'crypto', 'http', 'https', 'net', 'os', 'child_process', 'stream'];
const DEV_TOOLING = {
  group: ['**/stack/*', '**/scripts/**'],
  message: 'production code never imports the local stack or scripts (development tooling)',
};

const UP_FROM_INFRA = ['**/api/**', '**/core/**', '**/edge/**', '**/workflows/**', '**/activities/**', '**/workers/**'];

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
    // infra/ is the bottom layer: adapters (database, IPFS, Temporal's client) and contracts.
    // It never reaches up.
    files: ['infra/**/*.ts'],
    ignores: ['infra/temporal/contracts/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: UP_FROM_INFRA, message: 'infra/ imports no api/, core/, edge/, workflows/, activities/ or workers/' },
            DEV_TOOLING,
          ],
        },
      ],
    },
  },
  {
    // edge/ is the edge's side (its Caddyfile, the protocol the API and the edge share): beside
    // infra/, below the use-cases; it knows no surface and no use-case.
    files: ['edge/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/api/**', '**/core/**', '**/workflows/**', '**/activities/**', '**/workers/**'],
              message: 'edge/ imports only infra/',
            },
            DEV_TOOLING,
          ],
        },
      ],
    },
  },
  {
    // core/ holds the use-cases and the rules the API and the worker share. It knows no
    // transport and no surface, and no workflow code: both sides call it, it calls neither.
    files: ['core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['express', 'busboy', 'pino-http', '**/api/**', '**/workflows/**', '**/activities/**', '**/workers/**'],
              message: 'core/ knows no transport, no surface and no workflow code',
            },
            DEV_TOOLING,
          ],
        },
      ],
    },
  },
  {
    // The worker's side never imports a surface: what both sides need is in core/.
    files: ['activities/**/*.ts', 'workers/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/api/**'], message: 'the worker imports no api/: shared rules live in core/' }, DEV_TOOLING] },
      ],
    },
  },
  {
    files: ['api/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/workflows/**', '**/activities/**', '**/workers/**'],
              message: 'surfaces start workflows through core/ and infra/temporal',
            },
            DEV_TOOLING,
          ],
        },
      ],
    },
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
