'use strict';
// Builds the production-style Temporal server the tests run against (test/temporal-prod/, docs/temporal-cluster.md):
// temporal-server and temporal-sql-tool from the Go module proxy, pinned to the server inside the pinned Temporal
// CLI, plus the PostgreSQL schema files and the config model from the same module, all cached under
// .tools/temporal-server/<version>/. Node built-ins only (runs from scripts/setup.js).
//
// A missing Go toolchain or a failed build is a failure, not a skip: `npm test` runs suites against this server.
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { builtVersion, goCommand, makeFail, readJson, sha256 } = require('./go-build-kit');

const root = path.resolve(__dirname, '..');
/** One place for the pin, read by test/temporal-prod/ too. */
const { module: MODULE, version: VERSION } = JSON.parse(
  fs.readFileSync(path.join(root, 'test', 'temporal-prod', 'server-version.json'), 'utf8'),
);
const BINARIES = [
  { name: 'temporal-server', package: `${MODULE}/cmd/server` },
  { name: 'temporal-sql-tool', package: `${MODULE}/cmd/tools/sql` },
];
/** Copied out of the module cache, which `go clean -modcache` may empty. */
const MODULE_FILES = ['schema/postgresql/v12', 'config/development-postgres12.yaml'];

const dir = path.join(root, '.tools', 'temporal-server', VERSION);
const stampFile = path.join(dir, 'stamp.json');

const fail = makeFail('install-temporal-server');

/** Installed when every binary is the very file the stamp describes and the module files are there. */
function isInstalled() {
  const stamp = readJson(stampFile);
  if (!stamp || stamp.version !== VERSION || typeof stamp.sha256 !== 'object') return false;
  for (const binary of BINARIES) {
    const file = path.join(dir, 'bin', binary.name);
    if (!fs.existsSync(file) || stamp.sha256[binary.name] !== sha256(file)) return false;
  }
  return MODULE_FILES.every((relative) => fs.existsSync(path.join(dir, relative)));
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: 'utf8', ...options });
  if (result.error) fail(`could not run ${command}: ${result.error.message}`);
  if (result.status !== 0) {
    const output = `${result.stdout || ''}${result.stderr || ''}`.trim();
    fail(`\`${command} ${args.join(' ')}\` exited with ${result.signal || `code ${result.status}`}\n${output}`);
  }
  return (result.stdout || '').trim();
}

function requireGo() {
  return goCommand(
    fail,
    (why) =>
      `the Go toolchain is required to build ${MODULE} ${VERSION} (${why}).\n` +
      '  Install Go 1.25+ and put `go` on PATH, or set GO=/path/to/go. The production-style Temporal suites are\n' +
      '  part of `npm test`; they are never skipped.',
  );
}

function install() {
  if (isInstalled()) {
    console.error(`install-temporal-server: ${MODULE} ${VERSION} is installed (${path.relative(root, dir)})`);
    return;
  }
  const { go, version } = requireGo();
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  fs.rmSync(stampFile, { force: true });
  const started = Date.now();
  for (const binary of BINARIES) {
    const spec = `${binary.package}@${VERSION}`;
    console.error(`install-temporal-server: go install ${spec} (${version}; minutes on a cold cache)`);
    // `go install pkg@version` builds outside any module; the binaries are named after their package directory.
    const out = fs.mkdtempSync(path.join(dir, 'gobin-'));
    run(go, ['install', spec], {
      cwd: root,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, GOBIN: out },
    });
    const built = path.join(out, path.basename(binary.package));
    if (!fs.existsSync(built)) fail(`\`go install ${spec}\` succeeded but ${built} does not exist`);
    if (builtVersion(go, built, MODULE) !== VERSION) fail(`${built} was not built from ${MODULE} ${VERSION}`);
    fs.renameSync(built, path.join(bin, binary.name));
    fs.rmSync(out, { recursive: true, force: true });
  }
  const moduleDir = JSON.parse(run(go, ['mod', 'download', '-json', `${MODULE}@${VERSION}`], { cwd: dir })).Dir;
  for (const relative of MODULE_FILES) {
    const from = path.join(moduleDir, relative);
    if (!fs.existsSync(from)) fail(`${from} is missing from the module download`);
    fs.rmSync(path.join(dir, relative), { recursive: true, force: true });
    fs.mkdirSync(path.dirname(path.join(dir, relative)), { recursive: true });
    fs.cpSync(from, path.join(dir, relative), { recursive: true });
  }
  // Files copied from the module cache are read-only; our copies must stay removable.
  run('chmod', ['-R', 'u+w', dir]);
  const stamp = {
    module: MODULE,
    version: VERSION,
    go: version,
    sha256: Object.fromEntries(BINARIES.map((b) => [b.name, sha256(path.join(bin, b.name))])),
  };
  fs.writeFileSync(stampFile, `${JSON.stringify(stamp, null, 2)}\n`);
  const seconds = Math.round((Date.now() - started) / 1000);
  console.error(`install-temporal-server: ${MODULE} ${VERSION} installed in ${seconds}s (${path.relative(root, dir)})`);
}

install();
