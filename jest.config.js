/**
 * Two projects (docs/temporal-cluster.md): `dev` runs every suite against one real Temporal dev server; `prod-temporal`
 * runs the suites that matter for correctness against the production-style server (temporal-server on PostgreSQL,
 * four service processes, mTLS). `npx jest --selectProjects dev <path>` runs a suite against the dev server only.
 */
const base = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: { warnOnly: false } }] },
};

/** Create/delete, the rollout scenario, crash tests and the operator CLI, again on the production-style server. */
const PROD_SUITES = [
  'integration/create-idempotency',
  'integration/create-after-delete',
  'integration/rollout',
  'integration/controller-crash',
  'integration/node-crash',
  'integration/operator-cli',
];

module.exports = {
  testTimeout: 120000,
  projects: [
    {
      ...base,
      displayName: 'dev',
      testMatch: ['**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/prod/'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
    {
      ...base,
      displayName: 'prod-temporal',
      testMatch: [...PROD_SUITES.map((suite) => `<rootDir>/test/${suite}.test.ts`), '<rootDir>/test/prod/**/*.test.ts'],
      globalSetup: '<rootDir>/test/support/global-setup-prod.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown-prod.ts',
      setupFiles: ['<rootDir>/test/support/use-prod-temporal.ts'],
    },
  ],
};
