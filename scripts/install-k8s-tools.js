'use strict';
// Builds the Kubernetes control plane and CSI sidecars that the Kubernetes end-to-end test runs
// (test/e2e-k8s), from the Go module proxy, and caches them under the user's cache directory keyed
// by version: a machine builds each version once (~20 min cold on 2 cores; seconds afterwards).
// Node built-ins only: runs from scripts/setup.js, possibly before node_modules exists.
//
// A binary that cannot be built is a failure, never a skip: the e2e is part of `npm test`.
//
//   node scripts/install-k8s-tools.js          build what is missing
//   node scripts/install-k8s-tools.js --print  print where each binary and file is (JSON), without building
//   node scripts/install-k8s-tools.js kubernetes  build only the named sets (never two builds of one module at once)
// DURABLE_CSI_K8S_TOOLS=<dir> caches elsewhere than ~/.cache/durable-csi/k8s-tools (or $XDG_CACHE_HOME).
//
// k8s.io/kubernetes and external-provisioner carry replace directives, which `go install pkg@version`
// refuses; each set is built in a small wrapper module that requires the module and copies its
// replace lines (kubernetes' ./staging/... paths become the published k8s.io/<name> v0.<minor>.<patch>).
const { spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { goCommand, makeFail, readJson, sha256 } = require('./go-build-kit');

const KUBERNETES_VERSION = 'v1.36.3';
const STAGING_VERSION = `v0.${KUBERNETES_VERSION.slice(3)}`; // v1.36.3 -> v0.36.3

/** Version ldflags as Kubernetes' own build sets them; without them the binaries report v0.0.0-master. */
function versionLdflags(version) {
  const [major, minor] = version.slice(1).split('.');
  const flags = [];
  for (const pkg of ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version']) {
    flags.push(`-X ${pkg}.gitVersion=${version}`, `-X ${pkg}.gitMajor=${major}`, `-X ${pkg}.gitMinor=${minor}`);
    flags.push(`-X ${pkg}.gitTreeState=clean`);
  }
  return flags;
}

/**
 * One build = one wrapper module, all its binaries linked in one `go build` (shared packages compile once).
 * `go list -m -versions <module>` lists what the proxy serves; livenessprobe and node-driver-registrar are
 * refused by the proxy (403): the node agent serves kubelet's plugin registration and its health endpoint itself.
 */
const BUILDS = [
  {
    name: 'kubernetes',
    module: 'k8s.io/kubernetes',
    version: KUBERNETES_VERSION,
    // etcd: the version kubernetes v1.36.3 pins, resolved from the same module graph.
    packages: {
      etcd: 'go.etcd.io/etcd/server/v3',
      'kube-apiserver': 'k8s.io/kubernetes/cmd/kube-apiserver',
      'kube-controller-manager': 'k8s.io/kubernetes/cmd/kube-controller-manager',
      // Applies deploy/ exactly as an admin would: `kubectl apply --server-side -k`.
      kubectl: 'k8s.io/kubernetes/cmd/kubectl',
      // The real node (test/e2e-node): deploy/ runs as Pods, kubelet stages and publishes durable-csi volumes.
      // Added to this set's cache directory: only the missing binaries are built (the others keep their stamp).
      kubelet: 'k8s.io/kubernetes/cmd/kubelet',
      'kube-scheduler': 'k8s.io/kubernetes/cmd/kube-scheduler',
    },
    ldflags: versionLdflags(KUBERNETES_VERSION),
  },
  {
    // The CSI sidecars and the snapshot controller, in one module graph: the client libraries (client-go,
    // apimachinery, api: most of the compile) are built once for all four instead of once per sidecar. Each module
    // pins its own k8s.io/* versions with replace lines; here every k8s.io/* library is the newest any of them asks
    // for (external-resizer's), and external-snapshotter's ./client is its published client module.
    name: 'sidecars',
    module: 'github.com/kubernetes-csi/external-provisioner/v6',
    version: 'v6.4.0',
    also: [
      { module: 'github.com/kubernetes-csi/external-resizer/v2', version: 'v2.3.0' },
      { module: 'github.com/kubernetes-csi/external-snapshotter/v8', version: 'v8.7.0' },
    ],
    kubeLibraries: 'v0.37.1',
    packages: {
      'csi-provisioner': 'github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner',
      'csi-resizer': 'github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer',
      'csi-snapshotter': 'github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter',
      'snapshot-controller': 'github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller',
    },
    ldflags: [],
    // main.version per binary: they are different modules with different versions.
    versions: {
      'csi-provisioner': 'v6.4.0',
      'csi-resizer': 'v2.3.0',
      'csi-snapshotter': 'v8.7.0',
      'snapshot-controller': 'v8.7.0',
    },
    // The snapshot CRDs the snapshot-controller and csi-snapshotter serve (test/e2e-k8s/snapshots.test.ts applies
    // them; deploy/README.md has them as a cluster prerequisite): files of the published client module, copied
    // from the module cache into `files/`. Stamped there on their own: copying them never invalidates a binary.
    files: {
      module: 'github.com/kubernetes-csi/external-snapshotter/client/v8',
      version: 'v8.7.0',
      copy: {
        'volumesnapshotclasses-crd': 'config/crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml',
        'volumesnapshotcontents-crd': 'config/crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml',
        'volumesnapshots-crd': 'config/crd/snapshot.storage.k8s.io_volumesnapshots.yaml',
      },
    },
  },
  {
    // Kubernetes' external storage suite (test/e2e-node/storage-suite/): a Go test of our own that imports
    // only k8s.io/kubernetes/test/e2e/storage/external, so it builds faster than all of e2e.test; agnhost is the
    // helper image's binary the suite's subPath and exec Pods run.
    name: 'storage-suite',
    module: 'k8s.io/kubernetes',
    version: KUBERNETES_VERSION,
    // ginkgo: the CLI that runs the suite's binary in parallel processes (the version kubernetes pins).
    packages: { agnhost: 'k8s.io/kubernetes/test/images/agnhost', ginkgo: 'github.com/onsi/ginkgo/v2/ginkgo' },
    tests: {
      'e2e-storage.test': {
        dir: 'storagesuite',
        source: path.join(__dirname, '..', 'test', 'e2e-node', 'storage-suite', 'suite_test.go'),
      },
    },
    ldflags: versionLdflags(KUBERNETES_VERSION),
  },
];

function cacheRoot() {
  if (process.env.DURABLE_CSI_K8S_TOOLS) return path.resolve(process.env.DURABLE_CSI_K8S_TOOLS);
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'durable-csi', 'k8s-tools');
}

/** Every module a build requires, with its version: the build's identity. */
function requiredModules(build) {
  return [{ module: build.module, version: build.version }, ...(build.also || [])];
}

/** The directory holding one build's binaries; the versions are part of the name. */
function buildDir(build) {
  return path.join(cacheRoot(), [build.name, ...requiredModules(build).map((m) => m.version)].join('-'));
}

/** What the stamp records and checks: every module@version, and the k8s.io libraries a build forces. */
function buildIdentity(build) {
  const modules = requiredModules(build).map((m) => `${m.module}@${m.version}`);
  return [...modules, ...(build.kubeLibraries ? [`k8s.io/*@${build.kubeLibraries}`] : [])].join(' ');
}

const fail = makeFail('install-k8s-tools');

/** Every binary of a build: its packages and its test binaries (`go test -c` of a source file in the repo). */
function binaryNames(build) {
  return [...Object.keys(build.packages), ...Object.keys(build.tests || {})];
}

/** A test binary's source hash: a changed source rebuilds it. */
function sourceHash(build, name) {
  const test = (build.tests || {})[name];
  return test ? sha256(test.source) : undefined;
}

/** The binaries of a build that exist and are the very files its stamp describes for this version. */
function installedBinaries(build) {
  const dir = buildDir(build);
  const stamp = readJson(path.join(dir, 'stamp.json'));
  if (!stamp || stamp.module !== buildIdentity(build)) return [];
  return binaryNames(build).filter((name) => {
    const binary = path.join(dir, 'bin', name);
    const sources = stamp.sources || {};
    return (
      fs.existsSync(binary) &&
      stamp.sha256 &&
      stamp.sha256[name] === sha256(binary) &&
      sources[name] === sourceHash(build, name)
    );
  });
}

function run(go, args, cwd, env) {
  console.error(`install-k8s-tools: (${path.basename(cwd)}) ${go} ${args.join(' ')}`);
  const result = spawnSync(go, args, { cwd, stdio: ['ignore', 'inherit', 'inherit'], env });
  if (result.error) fail(`could not run ${go}: ${result.error.message}`);
  if (result.status !== 0) fail(`\`${go} ${args.join(' ')}\` exited with ${result.signal || `code ${result.status}`}`);
}

function requireGo() {
  return goCommand(
    fail,
    (why) =>
      `the Go toolchain (1.26 or later) is required to build the Kubernetes control plane for the e2e test (${why}).\n` +
      '  Install Go (https://go.dev/dl/) and put `go` on PATH, or set GO=/path/to/go. The e2e is never skipped.',
  );
}

/** `go mod download -json` of a module: where the module cache holds it (through the go command, so GOPROXY applies). */
function downloadedModule(go, { module, version }, env) {
  const result = spawnSync(go, ['mod', 'download', '-json', `${module}@${version}`], {
    encoding: 'utf8',
    env,
    cwd: os.tmpdir(),
  });
  const info = (() => {
    try {
      return JSON.parse(result.stdout);
    } catch {
      return undefined;
    }
  })();
  if (result.status !== 0 || !info || !info.GoMod)
    fail(`cannot download ${module}@${version}: ${(info && info.Error) || (result.stderr || '').trim()}`);
  return info;
}

/** The module's own go.mod, from the module proxy. */
function upstreamGoMod(go, owner, env) {
  return fs.readFileSync(downloadedModule(go, owner, env).GoMod, 'utf8');
}

/** The replace lines of a go.mod, single and block form, as [from, to]. */
function replaceLines(goMod) {
  const lines = [];
  let inBlock = false;
  for (const raw of goMod.split('\n')) {
    const line = raw.replace(/\/\/.*$/, '').trim();
    if (inBlock) {
      if (line === ')') inBlock = false;
      else if (line) lines.push(line);
    } else if (line === 'replace (') inBlock = true;
    else if (line.startsWith('replace ')) lines.push(line.slice('replace '.length).trim());
  }
  return lines.map((line) => line.split('=>').map((side) => side.trim()));
}

/**
 * One required module's replace lines as the wrapper's: kubernetes' ./staging/... paths become the published
 * k8s.io/<name> v0.<minor>.<patch>, a module's own local submodule (external-snapshotter's ./client) its published
 * version, and with kubeLibraries every k8s.io/* that version.
 */
function wrapperReplaces(goMod, build, owner) {
  const ownerBase = owner.module.replace(/\/v\d+$/, '');
  return replaceLines(goMod).map(([from, to]) => {
    const name = from.split(' ')[0];
    if (build.kubeLibraries && name.startsWith('k8s.io/')) return `${name} => ${name} ${build.kubeLibraries}`;
    const staging = /^\.\/staging\/src\/(k8s\.io\/[^ ]+)$/.exec(to);
    if (staging) return `${from} => ${staging[1]} ${STAGING_VERSION}`;
    if (to.startsWith('./') && name.startsWith(`${ownerBase}/`)) return `${name} => ${name} ${owner.version}`;
    if (to.startsWith('.') || to.startsWith('/'))
      fail(`cannot map the local replace "${from} => ${to}" to a published module`);
    return `${from} => ${to}`;
  });
}

/** The wrapper's replace lines for every module it requires; two modules replacing one path differently fail. */
function allReplaces(go, build, env) {
  const byPath = new Map();
  for (const owner of requiredModules(build))
    for (const line of wrapperReplaces(upstreamGoMod(go, owner, env), build, owner)) {
      const name = line.split(' ')[0];
      if (byPath.has(name) && byPath.get(name) !== line)
        fail(`${build.name}: the modules disagree on ${name} ("${byPath.get(name)}" and "${line}")`);
      byPath.set(name, line);
    }
  return [...byPath.values()];
}

function install(build) {
  installBinaries(build);
  if (build.files) installFiles(build);
}

function installBinaries(build) {
  const dir = buildDir(build);
  const present = installedBinaries(build);
  const missing = binaryNames(build).filter((name) => !present.includes(name));
  if (missing.length === 0) {
    console.error(`install-k8s-tools: ${build.name} is cached (${dir})`);
    return;
  }
  const { go, version } = requireGo();
  const started = Date.now();
  // GOFLAGS from the caller could change what gets built (-mod=vendor, a different -tags): use ours only.
  const env = { ...process.env, GOFLAGS: '-mod=mod', GOWORK: 'off', CGO_ENABLED: '0' };
  const wrapper = path.join(dir, 'module');
  if (present.length === 0) fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(wrapper, { recursive: true });
  const replaces = allReplaces(go, build, env);
  const goMod = [
    `module durable-csi.local/k8s-tools/${build.name}`,
    '',
    'go 1.26.0',
    '',
    'require (',
    ...requiredModules(build).map((m) => `\t${m.module} ${m.version}`),
    ')',
    '',
    ...(replaces.length ? ['replace (', ...replaces.map((line) => `\t${line}`), ')', ''] : []),
  ].join('\n');
  if (!fs.existsSync(path.join(wrapper, 'go.mod'))) fs.writeFileSync(path.join(wrapper, 'go.mod'), goMod);
  // -mod=mod: the first build records go.sum for what it resolves; versions stay those the required module's
  // graph selects (no `go get`, which would upgrade etcd to the latest).
  const outDir = path.join(dir, 'bin');
  fs.mkdirSync(outDir, { recursive: true });
  const ldflagsOf = (name) =>
    ['-s', '-w', ...build.ldflags, ...(build.versions ? [`-X main.version=${build.versions[name]}`] : [])].join(' ');
  const stamp = readJson(path.join(dir, 'stamp.json')) || {};
  const hashes = present.length ? stamp.sha256 : {};
  const sources = present.length ? stamp.sources || {} : {};
  for (const name of missing) {
    const out = path.join(outDir, name);
    const test = (build.tests || {})[name];
    const ldflags = ldflagsOf(name);
    if (test) {
      fs.mkdirSync(path.join(wrapper, test.dir), { recursive: true });
      fs.copyFileSync(test.source, path.join(wrapper, test.dir, path.basename(test.source)));
      run(go, ['test', '-c', '-trimpath', `-ldflags=${ldflags}`, '-o', out, `./${test.dir}`], wrapper, env);
    } else run(go, ['build', '-trimpath', `-ldflags=${ldflags}`, '-o', out, build.packages[name]], wrapper, env);
    if (!fs.existsSync(out)) fail(`the build of ${name} succeeded but left no binary`);
    hashes[name] = sha256(out);
    const source = sourceHash(build, name);
    if (source) sources[name] = source;
    else delete sources[name];
    // Stamped after each binary: an interrupted cold build keeps what it finished.
    const next = { module: buildIdentity(build), go: version, sha256: hashes, sources };
    fs.writeFileSync(path.join(dir, 'stamp.json'), `${JSON.stringify(next, null, 2)}\n`);
    console.error(`install-k8s-tools: ${name} (${build.name}) built`);
  }
  const seconds = Math.round((Date.now() - started) / 1000);
  console.error(`install-k8s-tools: ${build.name} built in ${seconds} s (${outDir})`);
}

/** Where a build's files go, and their stamp: `<build dir>/files/`, apart from `bin/` and its stamp. */
function filesDir(build) {
  return path.join(buildDir(build), 'files');
}

/** The module a build's files come from, as its files' stamp records it. */
function filesIdentity(build) {
  return `${build.files.module}@${build.files.version}`;
}

/** The files of a build that exist and are the very files their stamp describes for this module version. */
function installedFiles(build) {
  const dir = filesDir(build);
  const stamp = readJson(path.join(dir, 'stamp.json'));
  if (!stamp || stamp.module !== filesIdentity(build) || !stamp.sha256) return [];
  return Object.keys(build.files.copy).filter((name) => {
    const file = path.join(dir, name + path.extname(build.files.copy[name]));
    return fs.existsSync(file) && stamp.sha256[name] === sha256(file);
  });
}

/**
 * Copies a build's files from its module (`go mod download -json` names the module cache's directory: the proxy is
 * asked only when the cache lacks it), unless the stamped copies are there. The binaries and their stamp are left
 * alone: a set whose binaries are built gains its files without a rebuild.
 */
function installFiles(build) {
  const dir = filesDir(build);
  const present = installedFiles(build);
  const names = Object.keys(build.files.copy);
  if (present.length === names.length) {
    console.error(`install-k8s-tools: ${build.name} files are cached (${dir})`);
    return;
  }
  const { go } = requireGo();
  const env = { ...process.env, GOFLAGS: '-mod=mod', GOWORK: 'off' };
  const moduleDir = downloadedModule(go, build.files, env).Dir;
  if (!moduleDir) fail(`\`go mod download -json ${filesIdentity(build)}\` named no directory`);
  fs.mkdirSync(dir, { recursive: true });
  const hashes = {};
  for (const name of names) {
    const source = path.join(moduleDir, build.files.copy[name]);
    if (!fs.existsSync(source)) fail(`${filesIdentity(build)} has no ${build.files.copy[name]}`);
    const target = path.join(dir, name + path.extname(source));
    // The module cache's files are read-only; the copy is a plain file.
    fs.writeFileSync(target, fs.readFileSync(source));
    hashes[name] = sha256(target);
  }
  const stamp = { module: filesIdentity(build), sha256: hashes };
  fs.writeFileSync(path.join(dir, 'stamp.json'), `${JSON.stringify(stamp, null, 2)}\n`);
  console.error(`install-k8s-tools: ${build.name} files copied from ${filesIdentity(build)} (${dir})`);
}

/** name -> absolute path of every binary (of the named sets only, when given), for the e2e (which fails loudly if
 * one is missing). */
function binaries(sets) {
  const out = {};
  for (const build of BUILDS.filter((b) => !sets || sets.includes(b.name)))
    for (const name of binaryNames(build)) out[name] = path.join(buildDir(build), 'bin', name);
  return out;
}

/** name -> absolute path of every file a build copies (the snapshot CRDs), for the e2e likewise. */
function files(sets) {
  const out = {};
  for (const build of BUILDS.filter((b) => !sets || sets.includes(b.name)))
    for (const [name, source] of Object.entries(build.files ? build.files.copy : {}))
      out[name] = path.join(filesDir(build), name + path.extname(source));
  return out;
}

module.exports = { binaries, files, cacheRoot, installFiles, BUILDS };

if (require.main === module) {
  if (process.argv.includes('--print'))
    process.stdout.write(`${JSON.stringify({ ...binaries(), ...files() }, null, 2)}\n`);
  else {
    const only = process.argv.slice(2).filter((arg) => !arg.startsWith('-'));
    const unknown = only.filter((name) => !BUILDS.some((build) => build.name === name));
    if (unknown.length)
      fail(`unknown set ${unknown.join(', ')} (sets: ${BUILDS.map((build) => build.name).join(', ')})`);
    for (const build of BUILDS) if (only.length === 0 || only.includes(build.name)) install(build);
  }
}
