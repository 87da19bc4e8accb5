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

/**
 * The suites that need the Kubernetes binaries and images. scripts/test.js runs them last, once its background
 * build has made those, and sets DURABLE_CSI_SKIP_KUBERNETES_SUITES=1 for the run before (never set by hand: it
 * would leave them out).
 */
const KUBERNETES_SUITES = ['<rootDir>/test/e2e-k8s/', '<rootDir>/test/e2e-node/', '<rootDir>/test/e2e-cluster/'];
const withoutKubernetes = process.env.DURABLE_CSI_SKIP_KUBERNETES_SUITES === '1';

/**
 * scripts/test.js runs phase 1's suites several at a time (DURABLE_CSI_SUITES=parallel), then the few that cannot run
 * beside others one after another (DURABLE_CSI_SUITES=exclusive; test/support/exclusive-suites.js says why each).
 * Unset, every suite runs, as jest is told.
 */
const { EXCLUSIVE_SUITES } = require('./test/support/exclusive-suites');
const exclusive = Object.keys(EXCLUSIVE_SUITES).map((suite) => `<rootDir>/${suite}`);
const suites = process.env.DURABLE_CSI_SUITES;
if (suites !== undefined && suites !== 'parallel' && suites !== 'exclusive')
  throw new Error(`DURABLE_CSI_SUITES=${suites}: "parallel", "exclusive" or unset`);

module.exports = {
  testTimeout: 120000,
  // The longest suites first when phase 1 runs several at a time (test/support/sequencer.js says why).
  testSequencer: '<rootDir>/test/support/sequencer.js',
  projects: [
    {
      ...base,
      displayName: 'dev',
      testMatch: suites === 'exclusive' ? exclusive : ['**/*.test.ts'],
      testPathIgnorePatterns: [
        '/node_modules/',
        '<rootDir>/test/prod/',
        ...(withoutKubernetes ? KUBERNETES_SUITES : []),
        ...(suites === 'parallel' ? exclusive : []),
      ],
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
