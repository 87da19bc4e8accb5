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

/** In the order the suites need them. Only the images need setup's work (dist/ goes into the driver's image). */
const STEPS = [
  { name: 'temporal-server', args: [path.join('scripts', 'install-temporal-server.js')] },
  { name: 'control plane', args: [path.join('scripts', 'install-k8s-tools.js'), 'kubernetes', 'sidecars'] },
  // The real node's suites but the storage suite need the images and not the storage suite's binary: they run
  // while it builds.
  { name: 'images', args: [path.join('scripts', 'image', 'build.js'), '--node'], afterSetup: true },
  { name: 'storage suite', args: [path.join('scripts', 'install-k8s-tools.js'), 'storage-suite'] },
  { name: 'storage suite images', args: [path.join('scripts', 'image', 'build.js'), '--all'], afterSetup: true },
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
 * Starts the steps; ready(name) resolves with that step's result, ready('all') once every step has ended. The
 * steps marked afterSetup wait for setupDone(); stop() ends whatever runs (this process is ending).
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

  async function ready(name) {
    if (name !== 'all' && !STEPS.some((step) => step.name === name)) throw new Error(`no background step "${name}"`);
    const progress = setInterval(() => {
      if (running)
        console.error(
          `test: waiting for the background build: ${running.name} for ${Math.round((Date.now() - running.since) / 1000)} s`,
        );
    }, 60_000);
    while (!(name === 'all' ? results.size === STEPS.length : results.has(name)))
      await Promise.race([finished, new Promise((resolve) => setTimeout(resolve, 1000))]);
    clearInterval(progress);
    const failed = [...results.values()].filter((result) => !result.ok && (name === 'all' || result.name === name));
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
