'use strict';
// The tools the chart and monitoring tests run (test/e2e-k8s/chart.test.ts, prometheus-rules.test.ts,
// test/e2e-node/chart-install.test.ts): helm, built from the Go module proxy at a pinned version (`go install`: the
// module has no replace directives), and promtool, taken from Debian's `prometheus` package without installing it
// (apt-get download, the one file extracted). Each is cached by version under the user's cache directory, like
// scripts/install-k8s-tools.js. Node built-ins only: runs before node_modules may exist.
//
//   node scripts/install-chart-tools.js           build what is missing
//   node scripts/install-chart-tools.js helm      build only the named tools
//   node scripts/install-chart-tools.js --print   print where each binary is (JSON), without building
// DURABLE_CSI_CHART_TOOLS=<dir> caches elsewhere than ~/.cache/durable-csi/chart-tools (or $XDG_CACHE_HOME).
//
// A tool that cannot be built is a failure, never a skip: the tests that need it are part of `npm test`.
const { spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { builtVersion, goCommand, makeFail, readJson, sha256 } = require('./go-build-kit');

/**
 * Cold, with an empty Go build cache and the modules downloaded on the way (2-core machine, load average about 10):
 * helm 245 CPU-seconds (3 min 40 s wall). promtool built the same way (github.com/prometheus/prometheus v0.316.0,
 * Prometheus 3.16, with `remove_all_sd` to leave out the service discovery SDKs) took 195 CPU-seconds; Debian's
 * (bookworm: 2.42) costs a 19 MB download and no CPU, and passes the same rule tests: CI's cold time decided.
 */
const TOOLS = [
  {
    name: 'helm',
    source: 'go',
    module: 'helm.sh/helm/v4',
    package: 'helm.sh/helm/v4/cmd/helm',
    version: 'v4.3.2',
    // What helm's Makefile sets for a release build: without it `helm version` says v4.3 and "unreleased".
    ldflags: [
      '-X helm.sh/helm/v4/internal/version.version=v4.3.2',
      '-X helm.sh/helm/v4/internal/version.metadata=',
      '-X helm.sh/helm/v4/internal/version.gitTreeState=clean',
    ],
    tags: [],
  },
  {
    name: 'promtool',
    source: 'debian',
    // The candidate version of the machine's apt lists (bookworm: 2.42.0+ds-5+deb12u1); the stamp records which.
    debianPackage: 'prometheus',
    file: 'usr/bin/promtool',
  },
];

const fail = makeFail('install-chart-tools');

function cacheRoot() {
  if (process.env.DURABLE_CSI_CHART_TOOLS) return path.resolve(process.env.DURABLE_CSI_CHART_TOOLS);
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'durable-csi', 'chart-tools');
}

/** One directory per tool and version: a new pin builds next to the old one. */
function toolDir(tool) {
  return path.join(cacheRoot(), tool.source === 'debian' ? `${tool.name}-debian` : `${tool.name}-${tool.version}`);
}

function binaryPath(tool) {
  return path.join(toolDir(tool), 'bin', tool.name);
}

/** What the stamp records: the module, its version, and how it was built (a changed flag rebuilds). */
function identity(tool) {
  if (tool.source === 'debian') return { debianPackage: tool.debianPackage, file: tool.file };
  return { module: tool.module, version: tool.version, ldflags: tool.ldflags, tags: tool.tags };
}

function isInstalled(tool) {
  const stamp = readJson(path.join(toolDir(tool), 'stamp.json'));
  const binary = binaryPath(tool);
  return (
    !!stamp &&
    JSON.stringify(stamp.identity) === JSON.stringify(identity(tool)) &&
    fs.existsSync(binary) &&
    stamp.sha256 === sha256(binary)
  );
}

function install(tool) {
  if (isInstalled(tool)) {
    console.error(`install-chart-tools: ${tool.name} is cached (${binaryPath(tool)})`);
    return;
  }
  if (tool.source === 'debian') installFromDebian(tool);
  else buildWithGo(tool);
}

/** The one file of a Debian package, from `apt-get download` (nothing installed, no service, no user made). */
function installFromDebian(tool) {
  const dir = toolDir(tool);
  fs.rmSync(dir, { recursive: true, force: true });
  const scratch = path.join(dir, 'download');
  fs.mkdirSync(scratch, { recursive: true });
  const run = (command, args) => {
    const result = spawnSync(command, args, { cwd: scratch, encoding: 'utf8' });
    if (result.error || result.status !== 0)
      fail(
        `\`${command} ${args.join(' ')}\` failed: ${(result.stderr || '').trim() || result.error || result.status}` +
          (command === 'apt-get' ? '\n  (Debian or Ubuntu with apt lists: run `apt-get update` once first)' : ''),
      );
    return result.stdout;
  };
  run('apt-get', ['download', tool.debianPackage]);
  const deb = fs.readdirSync(scratch).find((name) => name.endsWith('.deb'));
  if (!deb) fail(`apt-get download ${tool.debianPackage} left no .deb in ${scratch}`);
  const version = run('dpkg-deb', ['--field', deb, 'Version']).trim();
  run('dpkg-deb', ['--extract', deb, 'root']);
  const binary = binaryPath(tool);
  fs.mkdirSync(path.dirname(binary), { recursive: true });
  fs.copyFileSync(path.join(scratch, 'root', tool.file), binary);
  fs.chmodSync(binary, 0o755);
  fs.rmSync(scratch, { recursive: true, force: true });
  const stamp = { identity: identity(tool), version, sha256: sha256(binary) };
  fs.writeFileSync(path.join(dir, 'stamp.json'), `${JSON.stringify(stamp, null, 2)}\n`);
  console.error(`install-chart-tools: ${tool.name} from Debian's ${tool.debianPackage} ${version} (${binary})`);
}

function buildWithGo(tool) {
  const { go, version } = goCommand(
    fail,
    (why) =>
      `the Go toolchain (1.26 or later) is required to build ${tool.name} ${tool.version} (${why}).\n` +
      '  Install Go (https://go.dev/dl/) and put `go` on PATH, or set GO=/path/to/go. The chart tests are never skipped.',
  );
  const dir = toolDir(tool);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, 'bin'), { recursive: true });
  const spec = `${tool.package}@${tool.version}`;
  const args = [
    'install',
    '-trimpath',
    `-ldflags=${['-s', '-w', ...tool.ldflags].join(' ')}`,
    ...(tool.tags.length ? [`-tags=${tool.tags.join(',')}`] : []),
    spec,
  ];
  console.error(`install-chart-tools: ${go} ${args.join(' ')} (GOBIN=${path.join(dir, 'bin')})`);
  const started = Date.now();
  // `go install pkg@version` builds outside any module: no go.mod or go.work of ours changes what it builds; GOFLAGS
  // from the caller (-mod=vendor, other tags) must not either.
  const result = spawnSync(go, args, {
    cwd: os.tmpdir(),
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, GOBIN: path.join(dir, 'bin'), GOFLAGS: '', GOWORK: 'off', CGO_ENABLED: '0' },
  });
  if (result.error) fail(`could not run ${go}: ${result.error.message}`);
  if (result.status !== 0) fail(`\`${go} ${args.join(' ')}\` exited with ${result.signal || `code ${result.status}`}`);
  const binary = binaryPath(tool);
  if (!fs.existsSync(binary)) fail(`\`go install ${spec}\` succeeded but ${binary} does not exist`);
  const built = builtVersion(go, binary, tool.module);
  if (built !== tool.version)
    fail(`${binary} was built from ${tool.module} ${built || '(unknown)'}, not ${tool.version}`);
  const stamp = { identity: identity(tool), go: version, sha256: sha256(binary) };
  fs.writeFileSync(path.join(dir, 'stamp.json'), `${JSON.stringify(stamp, null, 2)}\n`);
  const seconds = Math.round((Date.now() - started) / 1000);
  console.error(`install-chart-tools: ${tool.name} ${tool.version} built in ${seconds} s (${binary})`);
}

/** name -> absolute path of every tool's binary, for the tests (which fail loudly when one is missing). */
function binaries() {
  return Object.fromEntries(TOOLS.map((tool) => [tool.name, binaryPath(tool)]));
}

module.exports = { binaries, TOOLS };

if (require.main === module) {
  if (process.argv.includes('--print')) process.stdout.write(`${JSON.stringify(binaries(), null, 2)}\n`);
  else {
    const only = process.argv.slice(2).filter((arg) => !arg.startsWith('-'));
    const unknown = only.filter((name) => !TOOLS.some((tool) => tool.name === name));
    if (unknown.length)
      fail(`unknown tool ${unknown.join(', ')} (tools: ${TOOLS.map((tool) => tool.name).join(', ')})`);
    for (const tool of TOOLS) if (only.length === 0 || only.includes(tool.name)) install(tool);
  }
}
