'use strict';
// `npm test`: setup, lint, then every jest suite, with the slow Go builds overlapped with the suites that do not
// need them. On a fresh machine the Go-built tools (temporal-server, the Kubernetes control plane, the sidecars,
// the storage suite) and the real node's images take ~40 min of CPU: built before the first test, they made a cold
// `.ci/run` take ~100 min. Here they build in the background at the lowest CPU and I/O priority while the suites
// that need none of them run, and the suites that do need them run last, each after what it needs is ready.
// Nothing is skipped: a background build that fails fails `npm test`, with its log.
//
//   phase 1  dev project, all but test/e2e-k8s and test/e2e-node   needs: setup (deps, build, CLI, csi-sanity)
//   phase 2  prod-temporal project                                 needs: temporal-server
//   phase 3  dev project, test/e2e-k8s                             needs: control plane and sidecars
//   phase 4  dev project, test/e2e-node (real kubelet, the suite)  needs: everything (images, storage suite)
// The Go builds start before setup (they need nothing of it); the images wait for setup's dist/.
const { spawn } = require('child_process');
const path = require('path');
const { startBackgroundBuild } = require('./background-build');

const root = path.resolve(__dirname, '..');
const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');
const E2E_K8S = 'test/e2e-k8s/';
const E2E_NODE = 'test/e2e-node/';
const TIMING_REPORTER = path.join(root, 'test', 'support', 'timing-reporter.js');

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
 * Paths go before --selectProjects, which would take them as more project names. Every phase also writes its
 * per-suite wall and CPU times to test-artifacts/timings/ (test/support/timing-reporter.js).
 */
const jestRun = (name, args, env = {}) =>
  step(
    name,
    process.execPath,
    [jest, '--runInBand', '--reporters=default', `--reporters=${TIMING_REPORTER}`, ...args],
    { DURABLE_CSI_TIMING_PHASE: name.replace(/ .*/, '').concat(name.match(/\d+/)?.[0] ?? ''), ...env },
  );

async function main() {
  const results = [];
  // The Go builds need nothing of setup's (npm ci, the build): they start first.
  const background = startBackgroundBuild();
  const setup = await step('setup', process.execPath, [path.join(root, 'scripts', 'setup.js'), '--defer-go-tools']);
  if (!setup.ok) {
    background.stop();
    process.exit(1);
  }
  console.error(`test: setup took ${setup.seconds} s`);
  background.setupDone();
  results.push(await step('lint', 'npm', ['run', 'lint', '--silent']));
  const phase1 = ['--selectProjects', 'dev'];
  results.push(await jestRun('phase 1 (dev)', phase1, { DURABLE_CSI_SKIP_KUBERNETES_SUITES: '1' }));
  const phases = [
    { name: 'phase 2 (prod-temporal)', needs: 'temporal-server', args: ['--selectProjects', 'prod-temporal'] },
    {
      name: 'phase 3 (Kubernetes control plane)',
      needs: ['control plane', 'sidecars'],
      args: [E2E_K8S, '--selectProjects', 'dev'],
    },
    { name: 'phase 4 (real node)', needs: 'all', args: [E2E_NODE, '--selectProjects', 'dev'] },
  ];
  for (const phase of phases) {
    const ready = await background.ready(phase.needs);
    results.push(ready.ok ? await jestRun(phase.name, phase.args) : { ...ready, name: `${phase.name}: ${ready.name}` });
  }
  console.error(`test: background build: ${background.summary()}`);
  for (const result of results)
    console.error(
      `test: ${result.ok ? 'ok    ' : 'FAILED'} ${result.name}` +
        `${result.seconds === undefined ? '' : ` (${result.seconds} s)`}${result.ok ? '' : `: ${result.why}`}`,
    );
  process.exit(results.every((result) => result.ok) ? 0 : 1);
}

main().catch((error) => {
  console.error(`test: ${error.stack || error}`);
  process.exit(1);
});
