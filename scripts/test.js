'use strict';
// `npm test`: setup, then lint and every jest suite, with the slow Go builds overlapped with the suites that do not
// need them (docs/testing.md). On a fresh machine the Go-built tools (temporal-server, the Kubernetes control plane
// and kubelet, the sidecars, the storage suite) and the real node's images take most of the CPU of a cold run: they
// build in the background at the lowest CPU and I/O priority (scripts/background-build.js) while the suites that
// need none of them run, and each later phase starts as soon as what it needs is ready. Nothing is skipped: a
// background build that fails fails `npm test`, with its log.
//
//   lint      eslint and prettier                                   needs: setup     beside phase 1
//   phase 1   dev project, all but the Kubernetes suites, in parallel needs: setup (deps, build, CLI, csi-sanity)
//   phase 2   prod-temporal project                                  needs: temporal-server
//   phase 3   dev project, test/e2e-k8s                              needs: the control plane, sidecars, helm
//   phase 4   dev project, test/e2e-node but the storage suite       needs: kubelet, sidecars, helm, the images
//   phase 5   dev project, test/e2e-node/storage-suite               needs: phase 4's and the suite's binaries
//   phase 6   dev project, the three-node cluster: the upgrade from   needs: phase 4's, the release's image and
//             the release, a node lost, the suite's multi-node specs        the suite's binaries
// Phases 2 to 6 start once phase 1 is done, each as soon as its needs are ready, side by side; phases 4 and 5 one
// after the other (one lane of real nodes), phase 6 in a lane of its own beside them (node-lock.ts: two real-node
// runs at once; they mostly wait). The rest of test/e2e-cluster runs in `npm run test:cluster` (docs/testing.md).
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { startBackgroundBuild } = require('./background-build');
const { EXCLUSIVE_SUITES } = require('../test/support/exclusive-suites');

const root = path.resolve(__dirname, '..');
const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');
const E2E_K8S = 'test/e2e-k8s/';
const E2E_NODE = 'test/e2e-node/';
const STORAGE_SUITE = 'test/e2e-node/storage-suite/';
// The seed's scenario (issue 35): an upgrade from the release and back, and a node lost, on three real nodes; and the
// storage suite's specs that need several nodes. Scheduling across nodes runs in `npm run test:cluster`.
const CLUSTER_SUITES = [
  'test/e2e-cluster/upgrade.test.ts',
  'test/e2e-cluster/node-lost.test.ts',
  'test/e2e-cluster/storage-suite.test.ts',
];
const TIMING_REPORTER = path.join(root, 'test', 'support', 'timing-reporter.js');

/**
 * Phase 1's suites mostly wait (on timers, on Temporal, on processes starting: docs/testing.md has the table): they
 * run this many at a time. Each is isolated by its driver name, its own ports, pools and sockets; the few that are
 * not are test/support/exclusive-suites.js's, run alone after the others.
 */
const PHASE1_WORKERS = Number(process.env.DURABLE_CSI_TEST_WORKERS ?? Math.max(3, os.cpus().length + 1));

/**
 * A child process, awaited without blocking this one (never spawnSync): the background build moves on to its next
 * step meanwhile.
 */
function step(name, command, args, env = {}) {
  console.error(`test: ${name}: ${command} ${args.join(' ')}`);
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
    const seconds = () => Math.round((Date.now() - started) / 1000);
    child.on('error', (error) => resolve({ name, ok: false, why: error.message, seconds: seconds() }));
    child.on('exit', (code, signal) =>
      resolve({ name, ok: code === 0, why: signal || `exit ${code}`, seconds: seconds() }),
    );
  });
}

/**
 * Paths go before --selectProjects, which would take them as more project names. Every run also writes its
 * per-suite wall and CPU times to test-artifacts/timings/<timing>.json (test/support/timing-reporter.js).
 */
function jestRun(name, timing, args, { env = {}, workers } = {}) {
  const parallel = workers === undefined ? ['--runInBand'] : [`--maxWorkers=${workers}`];
  // An earlier run's file would name its failures as this run's (printFailures) if this one wrote none.
  fs.rmSync(timingsFile(timing), { force: true });
  return step(
    name,
    process.execPath,
    // The reporters last: --reporters takes every word after it that is not an option, paths included.
    [jest, ...parallel, ...args, '--reporters=default', `--reporters=${TIMING_REPORTER}`],
    { DURABLE_CSI_TIMING_PHASE: timing, ...env },
  ).then((result) => ({ ...result, timing }));
}

/** Phase 1: the isolated suites side by side, then the exclusive ones alone (jest.config.js says why each is). */
async function phase1() {
  const env = { DURABLE_CSI_SKIP_KUBERNETES_SUITES: '1' };
  const parallel = await jestRun('phase 1 (dev, in parallel)', 'phase1', ['--selectProjects', 'dev'], {
    env: { ...env, DURABLE_CSI_SUITES: 'parallel' },
    workers: PHASE1_WORKERS,
  });
  if (Object.keys(EXCLUSIVE_SUITES).length === 0) return [parallel];
  const alone = await jestRun('phase 1 (dev, exclusive suites)', 'phase1-exclusive', ['--selectProjects', 'dev'], {
    env: { ...env, DURABLE_CSI_SUITES: 'exclusive' },
  });
  return [parallel, alone];
}

const LATER_PHASES = [
  {
    name: 'phase 2 (prod-temporal)',
    timing: 'phase2',
    needs: ['temporal-server'],
    args: ['--selectProjects', 'prod-temporal'],
  },
  {
    name: 'phase 3 (Kubernetes control plane)',
    timing: 'phase3',
    needs: ['control plane', 'sidecars', 'chart tools'],
    args: [E2E_K8S, '--selectProjects', 'dev'],
  },
  {
    name: 'phase 4 (real node)',
    timing: 'phase4',
    needs: ['control plane', 'sidecars', 'chart tools', 'images'],
    lane: 'node',
    args: [E2E_NODE, `--testPathIgnorePatterns=${STORAGE_SUITE}`, '--selectProjects', 'dev'],
  },
  {
    name: 'phase 5 (storage suite)',
    timing: 'phase5',
    needs: ['control plane', 'sidecars', 'chart tools', 'images', 'storage suite'],
    lane: 'node',
    args: [STORAGE_SUITE, '--selectProjects', 'dev'],
  },
  {
    name: 'phase 6 (three-node cluster)',
    timing: 'phase6',
    needs: ['control plane', 'sidecars', 'chart tools', 'images', 'release image', 'storage suite'],
    lane: 'cluster',
    args: [...CLUSTER_SUITES, '--selectProjects', 'dev'],
  },
];

/**
 * Runs each later phase as soon as its needs are built, side by side (they mostly wait, and on different servers),
 * but the phases of one lane of real nodes one at a time, in the order they become ready: a lane is one of the
 * machine's real-node slots (test/e2e-node/node-lock.ts).
 */
async function laterPhases(background) {
  const lanes = new Map();
  const run = async (phase) => {
    const readies = await Promise.all(phase.needs.map((need) => background.ready(need)));
    const failed = readies.find((ready) => !ready.ok);
    if (failed) return { ...failed, name: `${phase.name}: ${failed.name}` };
    if (!phase.lane) return jestRun(phase.name, phase.timing, phase.args);
    const turn = (lanes.get(phase.lane) ?? Promise.resolve()).then(() => jestRun(phase.name, phase.timing, phase.args));
    lanes.set(phase.lane, turn);
    return turn;
  };
  return Promise.all(LATER_PHASES.map(run));
}

/**
 * A failed jest phase's failures again, from its timings file (test/support/timing-reporter.js): at the end of the
 * output, where CI's kept tail shows them, whatever the suites printed after them.
 */
function printFailures(result) {
  const file = timingsFile(result.timing);
  let failures;
  try {
    failures = JSON.parse(fs.readFileSync(file, 'utf8')).failures ?? [];
  } catch (error) {
    console.error(`test: ${result.name}: no failures recorded in ${file} (${error.message})`);
    return;
  }
  const shown = failures.slice(0, 10);
  for (const failure of shown)
    console.error(`test: ${result.name} failed: ${failure.suite} > ${failure.test}\n${indent(failure.message)}`);
  if (failures.length > shown.length)
    console.error(`test: ${result.name}: ${failures.length - shown.length} more failed (${file})`);
}

function timingsFile(timing) {
  return path.join(root, 'test-artifacts', 'timings', `${timing}.json`);
}

function indent(text) {
  return text
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');
}

async function main() {
  const started = Date.now();
  // The Go builds need nothing of setup's (npm ci, the build): they start first.
  const background = startBackgroundBuild();
  const setup = await step('setup', process.execPath, [path.join(root, 'scripts', 'setup.js'), '--defer-go-tools']);
  if (!setup.ok) {
    background.stop();
    process.exit(1);
  }
  console.error(`test: setup took ${setup.seconds} s`);
  background.setupDone();
  // Lint is CPU and phase 1 mostly waits: they run side by side.
  const [lint, phase1Results] = await Promise.all([step('lint', 'npm', ['run', 'lint', '--silent']), phase1()]);
  const results = [lint, ...phase1Results, ...(await laterPhases(background))];
  console.error(`test: background build: ${background.summary()}`);
  for (const result of results)
    console.error(
      `test: ${result.ok ? 'ok    ' : 'FAILED'} ${result.name}` +
        `${result.seconds === undefined ? '' : ` (${result.seconds} s)`}${result.ok ? '' : `: ${result.why}`}`,
    );
  for (const result of results.filter((each) => !each.ok && each.timing)) printFailures(result);
  console.error(`test: ${Math.round((Date.now() - started) / 1000)} s in all`);
  process.exit(results.every((result) => result.ok) ? 0 : 1);
}

main().catch((error) => {
  console.error(`test: ${error.stack || error}`);
  process.exit(1);
});
