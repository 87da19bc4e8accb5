import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importPlugin from 'eslint-plugin-import';
import { builtinModules } from 'node:module';

/**
 * The folders as floors, lowest first (docs/layout.md): code may import its own floor and those below, never one
 * above, with no exception. Folders on one floor may import each other; import/no-cycle keeps them from doing so both
 * ways. What clients and workflows share (names, search attributes, signals, the node record's shape) is in common/.
 */
const FLOORS = [
  ['common'],
  ['storage', 'temporal'],
  ['node-records'],
  ['activities'],
  ['workflows'],
  ['operations'],
  ['csi', 'kubernetes', 'metrics'],
  ['agent'],
  ['cli'],
];
/** Beside the floors: the dev server's harness, and the tests with the production-style server's (test/temporal-prod/). */
const DEV_TOOLS = ['temporal-dev', 'test'];
/**
 * The rooms of storage/ (docs/layout.md), lowest first, the same way: host/ knows nothing of a pool; pool/ holds
 * the backend contract and what every backend shares (the pool core, its journaled work, staging and publishing),
 * and imports no backend (what it asks of one are the hooks PoolBackend declares); each backend extends PoolBackend
 * on its own and never imports another backend.
 */
const STORAGE_ROOMS = [['host'], ['pool'], ['dir', 'loop']];

function storageZones() {
  const zones = [];
  STORAGE_ROOMS.forEach((floor, index) => {
    const above = STORAGE_ROOMS.slice(index + 1).flat();
    for (const target of floor) {
      const siblings = floor.filter((other) => other !== target);
      for (const from of [...above, ...siblings]) {
        zones.push({
          target: `./storage/${target}`,
          from: `./storage/${from}`,
          message: above.includes(from)
            ? `storage/${target}/ sits below storage/${from}/ (eslint.config.mjs STORAGE_ROOMS): ask through a hook.`
            : `storage/${target}/ does not import another backend: move what both need down.`,
        });
      }
    }
  });
  return zones;
}

function floorZones() {
  const zones = [];
  FLOORS.forEach((floor, index) => {
    const above = FLOORS.slice(index + 1).flat();
    for (const target of floor) {
      for (const from of above) {
        zones.push({
          target: `./${target}`,
          from: `./${from}`,
          message: `${target}/ sits below ${from}/ (eslint.config.mjs FLOORS): move the shared part down instead.`,
        });
      }
      for (const from of DEV_TOOLS) {
        zones.push({
          target: `./${target}`,
          from: `./${from}`,
          message: `production code does not import the dev and test harness ${from}/ (use temporal/ or common/).`,
        });
      }
    }
  });
  return zones;
}

export default tseslint.config(
  {
    ignores: [
      'csi/generated/**',
      'dist/**',
      'node_modules/**',
      '.tools/**',
      '.data/**',
      'coverage/**',
      'test-artifacts/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { import: importPlugin },
    settings: {
      'import/resolver': { node: { extensions: ['.ts', '.js'] } },
      // Without it the plugin reads the imported .ts files with its default (JavaScript) parser, fails, and sees no
      // imports in them: import/no-cycle then passes any cycle (two files importing each other included).
      'import/parsers': { '@typescript-eslint/parser': ['.ts'] },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'always'],
      'import/no-cycle': 'error',
    },
  },
  {
    files: [...FLOORS.flat().map((folder) => `${folder}/**/*.ts`), ...DEV_TOOLS.map((folder) => `${folder}/**/*.ts`)],
    rules: { 'import/no-restricted-paths': ['error', { zones: [...floorZones(), ...storageZones()] }] },
  },
  {
    // Workflow code is replayed: no Node built-ins, no I/O.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              // Every Node built-in, as temporalio/samples-typescript bans them, not a hand-written few.
              group: ['node:*', ...builtinModules, ...builtinModules.map((name) => `${name}/*`)],
              message: 'Workflow code must stay deterministic.',
            },
            { group: ['../storage/**', '../agent/**', '../csi/**'], message: 'Workflows import activity types only.' },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      globals: {
        require: 'readonly',
        module: 'writable',
        process: 'readonly',
        console: 'readonly',
        __dirname: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
