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
//   phase 3  dev project, test/e2e-k8s and test/e2e-node           needs: Kubernetes tools and images
const { spawn, spawnSync } = require('child_process');
const path = require('path');
const { startBackgroundBuild } = require('./background-build');

const root = path.resolve(__dirname, '..');
const jest = path.join(root, 'node_modules', 'jest', 'bin', 'jest.js');
const K8S_SUITES = ['test/e2e-k8s/', 'test/e2e-node/'];

function step(name, command, args) {
  console.error(`test: ${name}: ${command} ${args.join(' ')}`);
  const started = Date.now();
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  const seconds = Math.round((Date.now() - started) / 1000);
  if (result.error) return { name, ok: false, why: result.error.message, seconds };
  return { name, ok: result.status === 0, why: result.signal || `exit ${result.status}`, seconds };
}

/** A jest run in a child (not spawnSync), so this process can keep reporting the background build meanwhile. */
function jestRun(name, args, env = {}) {
  console.error(`test: ${name}: jest ${args.join(' ')}`);
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [jest, '--runInBand', ...args], {
      cwd: root,
      stdio: 'inherit',
      env: { ...process.env, ...env },
    });
    child.on('error', (error) => resolve({ name, ok: false, why: error.message }));
    child.on('exit', (code, signal) => {
      const seconds = Math.round((Date.now() - started) / 1000);
      resolve({ name, ok: code === 0, why: signal || `exit ${code}`, seconds });
    });
  });
}

async function main() {
  const results = [];
  const setup = step('setup', process.execPath, [path.join(root, 'scripts', 'setup.js'), '--defer-go-tools']);
  if (!setup.ok) process.exit(1);
  console.error(`test: setup took ${setup.seconds} s`);
  const background = startBackgroundBuild();
  results.push(step('lint', 'npm', ['run', 'lint', '--silent']));
  results.push(
    await jestRun('phase 1 (dev)', ['--selectProjects', 'dev'], { DURABLE_CSI_SKIP_KUBERNETES_SUITES: '1' }),
  );
  const server = await background.ready('temporal-server');
  results.push(server.ok ? await jestRun('phase 2 (prod-temporal)', ['--selectProjects', 'prod-temporal']) : server);
  const k8s = await background.ready('all');
  results.push(k8s.ok ? await jestRun('phase 3 (Kubernetes)', ['--selectProjects', 'dev', ...K8S_SUITES]) : k8s);
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
