'use strict';
// Runs before `npm test` / `npm run dev`: installs deps if stale, builds only if an input of the build changed
// since the last one (scripts/build-inputs.js), and makes sure a Temporal CLI and the test tools (csi-sanity,
// scripts/install-tools.js) exist. Node built-ins only, because node_modules may not exist yet.
const { spawnSync } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { forgetBuild, inputsFingerprint, isBuildFresh, recordBuild } = require('./build-inputs');
const { writeBuildInfo } = require('./build-info');

const root = path.resolve(__dirname, '..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function fail(message) {
  console.error(`setup: ${message}`);
  process.exit(1);
}

function run(step, command, args) {
  console.error(`setup: ${step}: ${command} ${args.join(' ')}`);
  // shell on Windows only, where npm is a .cmd shim.
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (result.error) fail(`${step} failed: could not run ${command}: ${result.error.message}`);
  if (result.status !== 0)
    fail(`${step} failed: \`${command} ${args.join(' ')}\` exited with ${result.signal || `code ${result.status}`}`);
}

function mtimeMs(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Written into node_modules after `npm ci`: the hash of the lock it was installed from. */
const LOCK_MARK = path.join(root, 'node_modules', '.durable-csi-lock.sha256');

function lockHash() {
  return crypto
    .createHash('sha256')
    .update(fs.readFileSync(path.join(root, 'package-lock.json')))
    .digest('hex');
}

/**
 * By content, not by time: a checkout (a second git worktree, a fresh clone whose node_modules is a link) gives
 * package-lock.json a new mtime without changing it, and `npm ci` through a linked node_modules would replace
 * another checkout's dependencies. Without our mark (installed by hand), the time comparison decides once.
 */
function depsAreStale() {
  if (!fs.existsSync(path.join(root, 'node_modules'))) return true;
  if (fs.existsSync(LOCK_MARK)) return fs.readFileSync(LOCK_MARK, 'utf8').trim() !== lockHash();
  const installed = mtimeMs(path.join(root, 'node_modules', '.package-lock.json'));
  if (installed === undefined) return true;
  const lock = mtimeMs(path.join(root, 'package-lock.json'));
  return lock !== undefined && lock > installed;
}

if (depsAreStale()) run('install dependencies', npm, ['ci']);
if (fs.existsSync(path.join(root, 'node_modules')) && !fs.existsSync(LOCK_MARK))
  fs.writeFileSync(LOCK_MARK, `${lockHash()}\n`);
const inputs = inputsFingerprint(root);
if (isBuildFresh(root, inputs)) {
  console.error('setup: build is up to date (no source, proto or asset changed since the last build)');
} else {
  forgetBuild(root);
  run('build', npm, ['run', 'build', '--silent']);
  recordBuild(root, inputs);
}
// The commit is not an input of tsc: a new commit with no source change skips the build, and only this says which
// commit dist/ now stands for (scripts/build-info.js).
writeBuildInfo(root);
run('ensure Temporal CLI', process.execPath, [path.join('dist', 'temporal-dev', 'ensure-cli.js')]);
// The test tools need Go; `npm run dev` and `npm run bench` do not use them, so only the test scripts (or a
// direct `node scripts/setup.js`) install them.
const lifecycle = process.env.npm_lifecycle_event;
if (lifecycle === undefined || lifecycle === 'test' || lifecycle === 'sanity')
  run('install test tools', process.execPath, [path.join('scripts', 'install-tools.js')]);
// The Go-built tools and images below take ~40 min cold; `npm test` (scripts/test.js) passes --defer-go-tools and
// builds them in the background while the suites that need none of them run.
const deferGoTools = process.argv.includes('--defer-go-tools');
const full = (lifecycle === undefined || lifecycle === 'test') && !deferGoTools;
// The Kubernetes e2e's control plane and sidecars: ~20 min to build cold, cached by version in the user's cache.
if (full) run('build Kubernetes test binaries', process.execPath, [path.join('scripts', 'install-k8s-tools.js')]);
// The real node's images (the driver from dist/, the sidecars from the Go builds above, pause, busybox): ~6-13 min
// cold, cached by content afterwards (docs/images.md). Built here, not inside the test, whose hooks have a timeout.
if (full) run('build images', process.execPath, [path.join('scripts', 'image', 'build.js'), '--all']);
// The production-style Temporal (temporal-server built with Go, cached by version) for the prod-temporal suites.
if (full) run('install temporal-server', process.execPath, [path.join('scripts', 'install-temporal-server.js')]);
