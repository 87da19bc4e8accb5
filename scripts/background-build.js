'use strict';
// The Go-built test tools and the images, built one after another in child processes at the lowest CPU and I/O
// priority (they take only what the running suites leave idle), logged to .tools/background-build.log.
// scripts/test.js waits for each before the suites that need it. Each step is the same script a person would run.
const { spawn, spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { clearInterval, setInterval, setTimeout } = require('timers');

const root = path.resolve(__dirname, '..');
const LOG = path.join(root, '.tools', 'background-build.log');

/**
 * In the order the suites need them: temporal-server (phase 2), the control plane with kubelet (every Kubernetes
 * suite), the sidecars (e2e-k8s, and with the images the real node's suites), the images (their agnhost is built
 * alone, before the storage suite's binary), then the storage suite's binary and Ginkgo, which only its suites run.
 * The Kubernetes steps are sets of one module graph (scripts/install-k8s-tools.js): each compiles only what the ones
 * before left. Only the images need setup's work (dist/ goes into the driver's image).
 */
const K8S_TOOLS = path.join('scripts', 'install-k8s-tools.js');
// The Kubernetes chain first: on a fresh machine it is the critical path (control plane, images, then the storage
// suite, whose phase 5 is the longest of the later phases: 846 s in a cold run), while temporal-server serves only
// phase 2 (351 s), which runs beside phase 5. Built first, temporal-server (1,057 s cold) held the storage suite back
// to 2,576 s after the start of a 3,421-s cold run.
const STEPS = [
  { name: 'control plane', args: [K8S_TOOLS, 'kubernetes'] },
  { name: 'sidecars', args: [K8S_TOOLS, 'sidecars'] },
  // helm (built) and promtool (Debian's): the chart's tests in phases 3 and 4 (scripts/install-chart-tools.js).
  { name: 'chart tools', args: [path.join('scripts', 'install-chart-tools.js')] },
  { name: 'images', args: [path.join('scripts', 'image', 'build.js'), '--all'], afterSetup: true },
  // The release the cluster's upgrade starts from (phase 6, which runs beside phase 4), built from its commit with
  // its own scripts and cached by commit. It seeds its image parts from the images step's cache
  // (test/e2e-node/release.ts), hence after it.
  { name: 'release image', args: [path.join('dist', 'test', 'e2e-node', 'release.js')], afterSetup: true },
  { name: 'storage suite', args: [K8S_TOOLS, 'storage-suite'] },
  { name: 'temporal-server', args: [path.join('scripts', 'install-temporal-server.js')] },
];

/** `nice -n 19 [ionice -c 3]`: ionice is util-linux's, present on Debian but not everywhere. */
function lowPriority() {
  const ionice = spawnSync('ionice', ['--version'], { stdio: 'ignore' });
  return ['nice', '-n', '19', ...(ionice.status === 0 ? ['ionice', '-c', '3'] : [])];
}

function runStep(step, log, children) {
  const started = Date.now();
  const [command, ...prefix] = lowPriority();
  fs.writeSync(log, `\n=== ${step.name}: node ${step.args.join(' ')}\n`);
  return new Promise((resolve) => {
    // Its own process group, so stop() ends the go commands under it too.
    const child = spawn(command, [...prefix, process.execPath, ...step.args], {
      cwd: root,
      stdio: ['ignore', log, log],
      detached: true,
    });
    children.add(child);
    child.on('exit', () => children.delete(child));
    const done = (ok, why) => resolve({ name: step.name, ok, why, seconds: Math.round((Date.now() - started) / 1000) });
    child.on('error', (error) => done(false, error.message));
    child.on('exit', (code, signal) => done(code === 0, signal || `exit ${code}`));
  });
}

function tail(file, lines) {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Starts the steps; ready(name) resolves with that step's result, ready([names]) with those steps' results,
 * ready('all') once every step has ended. The steps marked afterSetup wait for setupDone(); stop() ends whatever
 * runs (this process is ending).
 */
function startBackgroundBuild() {
  fs.mkdirSync(path.dirname(LOG), { recursive: true });
  const log = fs.openSync(LOG, 'w');
  const results = new Map();
  let running;
  const children = new Set();
  let setupDone;
  const setup = new Promise((resolve) => (setupDone = resolve));
  console.error(`test: building ${STEPS.map((step) => step.name).join(', ')} in the background (log: ${LOG})`);
  const finished = (async () => {
    for (const step of STEPS) {
      if (step.afterSetup) await setup;
      running = { name: step.name, since: Date.now() };
      const result = await runStep(step, log, children);
      results.set(step.name, result);
      console.error(
        `test: background ${step.name}: ${result.ok ? 'ready' : `FAILED (${result.why})`} in ${result.seconds} s`,
      );
    }
    running = undefined;
    fs.closeSync(log);
  })();

  async function ready(needs) {
    const names = needs === 'all' ? STEPS.map((step) => step.name) : [needs].flat();
    const unknown = names.filter((name) => !STEPS.some((step) => step.name === name));
    if (unknown.length) throw new Error(`no background step "${unknown.join('", "')}"`);
    const name = needs === 'all' ? 'all' : names.join(', ');
    const progress = setInterval(() => {
      if (running)
        console.error(
          `test: waiting for the background build: ${running.name} for ${Math.round((Date.now() - running.since) / 1000)} s`,
        );
    }, 60_000);
    while (!names.every((step) => results.has(step)))
      await Promise.race([finished, new Promise((resolve) => setTimeout(resolve, 1000))]);
    clearInterval(progress);
    const failed = [...results.values()].filter((result) => !result.ok && names.includes(result.name));
    if (failed.length === 0) return { name: `background ${name}`, ok: true };
    console.error(`test: the background build failed (${failed.map((f) => f.name).join(', ')}); the log's end:`);
    console.error(tail(LOG, 80));
    return { name: `background ${name}`, ok: false, why: `${failed.map((f) => `${f.name}: ${f.why}`).join('; ')}` };
  }

  const summary = () =>
    [...results.values()].map((r) => `${r.name} ${r.ok ? '' : 'FAILED '}${r.seconds} s`).join(', ') || 'not finished';
  const stop = () => {
    for (const child of children) {
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
  };
  return { ready, summary, setupDone: () => setupDone(), stop };
}

module.exports = { startBackgroundBuild, STEPS };
