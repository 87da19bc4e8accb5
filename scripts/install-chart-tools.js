'use strict';
// Builds the tools the chart and monitoring tests run (test/e2e-k8s/chart.test.ts, prometheus-rules.test.ts):
// helm and promtool, each from the Go module proxy at a pinned version, each in its own `go install` (neither module
// has replace directives), cached by version under the user's cache directory like scripts/install-k8s-tools.js.
// Node built-ins only: runs before node_modules may exist.
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
 * helm 245 CPU-seconds (3 min 40 s wall), promtool 195 CPU-seconds (2 min 56 s wall). promtool is built with
 * `remove_all_sd`: the service discovery plugins (AWS, Azure, GCE and twenty more SDKs) are left out, which
 * `promtool check rules` and `promtool test rules` never use. Debian's promtool (the `prometheus` package, 2.42) would
 * cost no build, but installs a server with a service and is three years older than the rules' Prometheus.
 */
const TOOLS = [
  {
    name: 'helm',
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
    module: 'github.com/prometheus/prometheus',
    package: 'github.com/prometheus/prometheus/cmd/promtool',
    // Prometheus 3.16's Go module version (its Go modules are numbered v0.3xx.y for release 3.xx.y).
    version: 'v0.316.0',
    ldflags: ['-X github.com/prometheus/common/version.Version=3.16.0'],
    tags: ['remove_all_sd'],
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
  return path.join(cacheRoot(), `${tool.name}-${tool.version}`);
}

function binaryPath(tool) {
  return path.join(toolDir(tool), 'bin', tool.name);
}

/** What the stamp records: the module, its version, and how it was built (a changed flag rebuilds). */
function identity(tool) {
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
    console.error(`install-chart-tools: ${tool.name} ${tool.version} is cached (${binaryPath(tool)})`);
    return;
  }
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
