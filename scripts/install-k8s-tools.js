'use strict';
// Builds the Kubernetes control plane, kubelet, the CSI sidecars and Kubernetes' storage suite that the
// Kubernetes tests run (test/e2e-k8s, test/e2e-node), from the Go module proxy, in ONE wrapper module graph: every
// package (client-go, apimachinery, api, the apiserver libraries...) compiles once for all of them. Cached under
// the user's cache directory keyed by version: a machine builds each version once (~20 min cold on 2 cores;
// nothing afterwards). Node built-ins only: runs from scripts/setup.js, possibly before node_modules exists.
//
// A binary that cannot be built is a failure, never a skip: the e2e is part of `npm test`.
//
//   node scripts/install-k8s-tools.js          build what is missing
//   node scripts/install-k8s-tools.js --print  print where each binary and file is (JSON), without building
//   node scripts/install-k8s-tools.js kubernetes sidecars  build only the named sets (or single binaries, such
//                                              as agnhost); one build at a time (a lock in the cache directory)
// DURABLE_CSI_K8S_TOOLS=<dir> caches elsewhere than ~/.cache/durable-csi/k8s-tools (or $XDG_CACHE_HOME).
//
// k8s.io/kubernetes and external-provisioner carry replace directives, which `go install pkg@version`
// refuses; the wrapper module requires every module and copies their replace lines (kubernetes' ./staging/...
// paths become the published k8s.io/<name> v0.<minor>.<patch>, and so does every sidecar's k8s.io/* line).
const { spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { goCommand, makeFail, readJson, sha256 } = require('./go-build-kit');

const KUBERNETES_VERSION = 'v1.37.2';
const STAGING_VERSION = `v0.${KUBERNETES_VERSION.slice(3)}`; // v1.37.2 -> v0.37.2

/**
 * What the one wrapper module requires. `go list -m -versions <module>` lists what the proxy serves; livenessprobe
 * and node-driver-registrar are refused by the proxy (403): the node agent serves kubelet's plugin registration and
 * its health endpoint itself. Everything else in the graph is what Go's minimal version selection picks, the newest
 * any of them asks for, except below.
 */
const PROVISIONER = { module: 'github.com/kubernetes-csi/external-provisioner/v6', version: 'v6.4.0' };
const RESIZER = { module: 'github.com/kubernetes-csi/external-resizer/v2', version: 'v2.3.0' };
const SNAPSHOTTER = { module: 'github.com/kubernetes-csi/external-snapshotter/v8', version: 'v8.7.0' };
const MODULES = [{ module: 'k8s.io/kubernetes', version: KUBERNETES_VERSION }, PROVISIONER, RESIZER, SNAPSHOTTER];

/**
 * Modules held at the version k8s.io/kubernetes pins even where a sidecar asks for a newer one: etcd (the server is
 * the etcd that Kubernetes release is tested with, and kube-apiserver talks to it with its own client version) and
 * Ginkgo/Gomega (the storage suite is Kubernetes' test code; the Ginkgo CLI must match the library in the suite's
 * binary). No sidecar compiles either.
 */
const KUBERNETES_PINNED = ['go.etcd.io/', 'github.com/onsi/'];

/**
 * Flags of every compile and link. DWARF is not generated (`-gcflags=all=-dwarf=false`): the linker drops it anyway
 * (-w), and skipping it cut etcd's cold compile by about a tenth. `go test -c` runs with -vet=off: vet would run
 * over every package the suite imports, for one file of ours.
 */
const GO_FLAGS = ['-trimpath', '-gcflags=all=-dwarf=false'];

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
 * The sets a caller builds or looks up, in the order the tests need them (scripts/background-build.js builds them as
 * separate steps): each builds only its own binaries, reusing what the others compiled (one graph, one build cache).
 * `versions` gives binaries of other modules their own main.version.
 */
const SETS = [
  {
    name: 'kubernetes',
    packages: {
      // etcd: the version kubernetes pins (KUBERNETES_PINNED).
      etcd: 'go.etcd.io/etcd/server/v3',
      'kube-apiserver': 'k8s.io/kubernetes/cmd/kube-apiserver',
      'kube-controller-manager': 'k8s.io/kubernetes/cmd/kube-controller-manager',
      // Applies deploy/ exactly as an admin would: `kubectl apply --server-side -k`.
      kubectl: 'k8s.io/kubernetes/cmd/kubectl',
      // The real node (test/e2e-node): deploy/ runs as Pods, kubelet stages and publishes durable-csi volumes.
      kubelet: 'k8s.io/kubernetes/cmd/kubelet',
      'kube-scheduler': 'k8s.io/kubernetes/cmd/kube-scheduler',
    },
    ldflags: versionLdflags(KUBERNETES_VERSION),
  },
  {
    // The CSI sidecars and the snapshot controller. Each upstream module pins its own k8s.io/* with replace lines;
    // here they are the staging version of the kubernetes above, and external-snapshotter's ./client is its
    // published client module.
    name: 'sidecars',
    packages: {
      'csi-provisioner': 'github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner',
      'csi-resizer': 'github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer',
      'csi-snapshotter': 'github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter',
      'snapshot-controller': 'github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller',
    },
    ldflags: [],
    // main.version per binary: the version of the module it comes from.
    versions: {
      'csi-provisioner': PROVISIONER.version,
      'csi-resizer': RESIZER.version,
      'csi-snapshotter': SNAPSHOTTER.version,
      'snapshot-controller': SNAPSHOTTER.version,
    },
    // The snapshot and group snapshot CRDs the snapshot-controller and csi-snapshotter serve
    // (test/e2e-k8s/snapshots.test.ts applies them; deploy/README.md has them as a cluster prerequisite): files of the
    // published client module, copied from the module cache into `files/`. Stamped there on their own: copying them
    // never invalidates a binary.
    files: {
      module: 'github.com/kubernetes-csi/external-snapshotter/client/v8',
      version: SNAPSHOTTER.version,
      copy: {
        'volumesnapshotclasses-crd': 'config/crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml',
        'volumesnapshotcontents-crd': 'config/crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml',
        'volumesnapshots-crd': 'config/crd/snapshot.storage.k8s.io_volumesnapshots.yaml',
        'volumegroupsnapshotclasses-crd': 'config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses.yaml',
        'volumegroupsnapshotcontents-crd': 'config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml',
        'volumegroupsnapshots-crd': 'config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml',
      },
    },
  },
  {
    // Kubernetes' external storage suite (test/e2e-node/storage-suite/): a Go test of our own that imports
    // only k8s.io/kubernetes/test/e2e/storage/external, so it builds faster than all of e2e.test; agnhost is the
    // helper image's binary the suite's subPath and exec Pods run (the image build asks for it alone, before the
    // suite's binary: `install-k8s-tools.js agnhost`).
    name: 'storage-suite',
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

/** The directory of the one build (wrapper module, bin/, files/, stamp); the versions are part of the name. */
function buildDir() {
  return path.join(cacheRoot(), ['k8s', ...MODULES.map((m) => m.version)].join('-'));
}

/**
 * What the stamp records and checks: every module@version, the k8s.io libraries' version, what is pinned to
 * kubernetes' versions and the compiler flags. Anything else changed means another build.
 */
function buildIdentity() {
  return [
    ...MODULES.map((m) => `${m.module}@${m.version}`),
    `k8s.io/*@${STAGING_VERSION}`,
    `pinned to kubernetes: ${KUBERNETES_PINNED.join(' ')}`,
    `flags: ${GO_FLAGS.join(' ')}`,
  ].join(' ');
}

const fail = makeFail('install-k8s-tools');

/** Every binary of a set: its packages and its test binaries (`go test -c` of a source file in the repo). */
function binaryNames(set) {
  return [...Object.keys(set.packages), ...Object.keys(set.tests || {})];
}

/** The set a binary belongs to. */
function setOf(name) {
  return SETS.find((set) => binaryNames(set).includes(name));
}

/** A test binary's source hash: a changed source rebuilds it. */
function sourceHash(name) {
  const test = (setOf(name).tests || {})[name];
  return test ? sha256(test.source) : undefined;
}

const stampFile = () => path.join(buildDir(), 'stamp.json');

/** The stamp, when it describes this build (versions, pins, flags); undefined otherwise. */
function currentStamp() {
  const stamp = readJson(stampFile());
  return stamp && stamp.module === buildIdentity() && stamp.sha256 ? stamp : undefined;
}

/** Of the named binaries, those that exist and are the very files the stamp describes. */
function installedBinaries(names) {
  const stamp = currentStamp();
  if (!stamp) return [];
  const sources = stamp.sources || {};
  return names.filter((name) => {
    const binary = path.join(buildDir(), 'bin', name);
    return fs.existsSync(binary) && stamp.sha256[name] === sha256(binary) && sources[name] === sourceHash(name);
  });
}

function run(go, args, cwd, env) {
  console.error(`install-k8s-tools: ${go} ${args.join(' ')}`);
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

/** The lines of a go.mod directive (`replace`, `require`), single and block form, comments removed. */
function directiveLines(goMod, directive) {
  const lines = [];
  let inBlock = false;
  for (const raw of goMod.split('\n')) {
    const line = raw.replace(/\/\/.*$/, '').trim();
    if (inBlock) {
      if (line === ')') inBlock = false;
      else if (line) lines.push(line);
    } else if (line === `${directive} (`) inBlock = true;
    else if (line.startsWith(`${directive} `)) lines.push(line.slice(directive.length + 1).trim());
  }
  return lines;
}

/** The replace lines of a go.mod as [from, to]. */
function replaceLines(goMod) {
  return directiveLines(goMod, 'replace').map((line) => line.split('=>').map((side) => side.trim()));
}

/**
 * One required module's replace lines as the wrapper's: kubernetes' ./staging/... paths and every k8s.io/* line
 * become the published k8s.io/<name> at the staging version, a module's own local submodule
 * (external-snapshotter's ./client) its published version.
 */
function wrapperReplaces(goMod, owner) {
  const ownerBase = owner.module.replace(/\/v\d+$/, '');
  return replaceLines(goMod).map(([from, to]) => {
    const name = from.split(' ')[0];
    if (name.startsWith('k8s.io/')) return `${name} => ${name} ${STAGING_VERSION}`;
    if (to.startsWith('./') && name.startsWith(`${ownerBase}/`)) return `${name} => ${name} ${owner.version}`;
    if (to.startsWith('.') || to.startsWith('/'))
      fail(`cannot map the local replace "${from} => ${to}" to a published module`);
    return `${from} => ${to}`;
  });
}

/** KUBERNETES_PINNED's modules at the versions kubernetes' go.mod requires, as replace lines. */
function kubernetesPins(kubernetesGoMod) {
  return directiveLines(kubernetesGoMod, 'require')
    .map((line) => line.split(/\s+/))
    .filter(([module]) => KUBERNETES_PINNED.some((prefix) => module.startsWith(prefix)))
    .map(([module, version]) => `${module} => ${module} ${version}`);
}

/** The wrapper's replace lines for every module it requires; two modules replacing one path differently fail. */
function allReplaces(go, env) {
  const byPath = new Map();
  const add = (line, why) => {
    const name = line.split(' ')[0];
    if (byPath.has(name) && byPath.get(name) !== line)
      fail(`the modules disagree on ${name} ("${byPath.get(name)}" and "${line}", ${why})`);
    byPath.set(name, line);
  };
  for (const owner of MODULES) {
    const goMod = upstreamGoMod(go, owner, env);
    for (const line of wrapperReplaces(goMod, owner)) add(line, owner.module);
    if (owner.module === 'k8s.io/kubernetes') for (const line of kubernetesPins(goMod)) add(line, 'pinned');
  }
  return [...byPath.values()];
}

function wrapperGoMod(go, env) {
  const replaces = allReplaces(go, env);
  return [
    'module durable-csi.local/k8s-tools',
    '',
    'go 1.26.0',
    '',
    'require (',
    ...MODULES.map((m) => `\t${m.module} ${m.version}`),
    ')',
    '',
    ...(replaces.length ? ['replace (', ...replaces.map((line) => `\t${line}`), ')', ''] : []),
  ].join('\n');
}

/** Sleeps without a busy loop (this script is synchronous). */
function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/**
 * One build at a time in the build directory (a person's run beside npm test's background build, or the image build
 * asking for agnhost): the wrapper's go.mod, bin/ and stamp are shared by every set. A lock whose process has died
 * is taken over. Returns the release function.
 */
function lockBuild() {
  const lock = path.join(cacheRoot(), `${path.basename(buildDir())}.lock`);
  fs.mkdirSync(cacheRoot(), { recursive: true });
  let waiting = false;
  for (;;) {
    try {
      fs.writeFileSync(lock, `${process.pid}\n`, { flag: 'wx' });
      return () => fs.rmSync(lock, { force: true });
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
    }
    const holder = Number.parseInt(fs.readFileSync(lock, 'utf8'), 10);
    if (!Number.isInteger(holder) || !alive(holder)) {
      fs.rmSync(lock, { force: true });
      continue;
    }
    if (!waiting) console.error(`install-k8s-tools: waiting for process ${holder}, which is building (${lock})`);
    waiting = true;
    sleep(2000);
  }
}

/** The name `go build -o <dir>/` gives a main package's binary: its last path element, a /vN suffix skipped. */
function execName(pkg) {
  const parts = pkg.split('/');
  const last = parts[parts.length - 1];
  return /^v\d+$/.test(last) && parts.length > 1 ? parts[parts.length - 2] : last;
}

/** The binaries' ldflags; binaries with the same ones link in one `go build`. */
function ldflagsOf(name) {
  const set = setOf(name);
  return ['-s', '-w', ...set.ldflags, ...(set.versions ? [`-X main.version=${set.versions[name]}`] : [])].join(' ');
}

/** Builds the named binaries that are missing (or not the files the stamp describes); the others stay. */
function installBinaries(names) {
  const present = installedBinaries(names);
  const missing = names.filter((name) => !present.includes(name));
  if (missing.length === 0) {
    console.error(`install-k8s-tools: ${names.join(', ')} cached (${buildDir()})`);
    return;
  }
  const { go, version } = requireGo();
  const started = Date.now();
  // GOFLAGS from the caller could change what gets built (-mod=vendor, a different -tags): use ours only.
  const env = { ...process.env, GOFLAGS: '-mod=mod', GOWORK: 'off', CGO_ENABLED: '0' };
  const dir = buildDir();
  const wrapper = path.join(dir, 'module');
  // A stamp of another build (other flags or pins in a directory of the same versions): start over.
  if (!currentStamp()) fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(wrapper, { recursive: true });
  // -mod=mod: the first build records go.sum for what it resolves; versions stay those the graph selects (no
  // `go get`, which would upgrade etcd to the latest).
  if (!fs.existsSync(path.join(wrapper, 'go.mod')))
    fs.writeFileSync(path.join(wrapper, 'go.mod'), wrapperGoMod(go, env));
  const outDir = path.join(dir, 'bin');
  fs.mkdirSync(outDir, { recursive: true });
  const stamped = (built) => {
    // Stamped after each `go` command: an interrupted cold build keeps what it finished.
    const stamp = currentStamp() || { module: buildIdentity(), sha256: {} };
    stamp.sources = stamp.sources || {};
    for (const name of built) {
      stamp.sha256[name] = sha256(path.join(outDir, name));
      const source = sourceHash(name);
      if (source) stamp.sources[name] = source;
      else delete stamp.sources[name];
    }
    stamp.go = version;
    fs.writeFileSync(stampFile(), `${JSON.stringify(stamp, null, 2)}\n`);
    console.error(`install-k8s-tools: ${built.join(', ')} built`);
  };
  // Main packages with the same ldflags in one `go build -o <dir>/`: their links run in parallel.
  const groups = new Map();
  for (const name of missing.filter((name) => setOf(name).packages[name])) {
    const ldflags = ldflagsOf(name);
    groups.set(ldflags, [...(groups.get(ldflags) || []), name]);
  }
  for (const [ldflags, group] of groups) {
    const scratch = fs.mkdtempSync(path.join(dir, 'out-'));
    const packages = group.map((name) => setOf(name).packages[name]);
    run(go, ['build', ...GO_FLAGS, `-ldflags=${ldflags}`, '-o', `${scratch}/`, ...packages], wrapper, env);
    for (const name of group) {
      const built = path.join(scratch, execName(setOf(name).packages[name]));
      if (!fs.existsSync(built)) fail(`the build of ${name} succeeded but left no ${built}`);
      fs.renameSync(built, path.join(outDir, name));
    }
    fs.rmSync(scratch, { recursive: true, force: true });
    stamped(group);
  }
  for (const name of missing.filter((name) => (setOf(name).tests || {})[name])) {
    const test = setOf(name).tests[name];
    const out = path.join(outDir, name);
    fs.mkdirSync(path.join(wrapper, test.dir), { recursive: true });
    fs.copyFileSync(test.source, path.join(wrapper, test.dir, path.basename(test.source)));
    const args = ['test', '-c', '-vet=off', ...GO_FLAGS, `-ldflags=${ldflagsOf(name)}`, '-o', out, `./${test.dir}`];
    run(go, args, wrapper, env);
    if (!fs.existsSync(out)) fail(`the build of ${name} succeeded but left no binary`);
    stamped([name]);
  }
  const seconds = Math.round((Date.now() - started) / 1000);
  console.error(`install-k8s-tools: ${missing.join(', ')} built in ${seconds} s (${outDir})`);
}

/** Where the files go, and their stamp: `<build dir>/files/`, apart from `bin/` and its stamp. */
function filesDir() {
  return path.join(buildDir(), 'files');
}

/** The module a set's files come from, as its files' stamp records it. */
function filesIdentity(set) {
  return `${set.files.module}@${set.files.version}`;
}

/** The files of a set that exist and are the very files their stamp describes for this module version. */
function installedFiles(set) {
  const dir = filesDir();
  const stamp = readJson(path.join(dir, 'stamp.json'));
  if (!stamp || stamp.module !== filesIdentity(set) || !stamp.sha256) return [];
  return Object.keys(set.files.copy).filter((name) => {
    const file = path.join(dir, name + path.extname(set.files.copy[name]));
    return fs.existsSync(file) && stamp.sha256[name] === sha256(file);
  });
}

/**
 * Copies a set's files from its module (`go mod download -json` names the module cache's directory: the proxy is
 * asked only when the cache lacks it), unless the stamped copies are there. The binaries and their stamp are left
 * alone: a build whose binaries are there gains its files without a rebuild.
 */
function installFiles(set) {
  const dir = filesDir();
  const present = installedFiles(set);
  const names = Object.keys(set.files.copy);
  if (present.length === names.length) {
    console.error(`install-k8s-tools: ${set.name} files are cached (${dir})`);
    return;
  }
  const { go } = requireGo();
  const env = { ...process.env, GOFLAGS: '-mod=mod', GOWORK: 'off' };
  const moduleDir = downloadedModule(go, set.files, env).Dir;
  if (!moduleDir) fail(`\`go mod download -json ${filesIdentity(set)}\` named no directory`);
  fs.mkdirSync(dir, { recursive: true });
  const hashes = {};
  for (const name of names) {
    const source = path.join(moduleDir, set.files.copy[name]);
    if (!fs.existsSync(source)) fail(`${filesIdentity(set)} has no ${set.files.copy[name]}`);
    const target = path.join(dir, name + path.extname(source));
    // The module cache's files are read-only; the copy is a plain file.
    fs.writeFileSync(target, fs.readFileSync(source));
    hashes[name] = sha256(target);
  }
  const stamp = { module: filesIdentity(set), sha256: hashes };
  fs.writeFileSync(path.join(dir, 'stamp.json'), `${JSON.stringify(stamp, null, 2)}\n`);
  console.error(`install-k8s-tools: ${set.name} files copied from ${filesIdentity(set)} (${dir})`);
}

/** name -> absolute path of every binary (of the named sets only, when given), for the e2e (which fails loudly if
 * one is missing). */
function binaries(sets) {
  const out = {};
  for (const set of SETS.filter((s) => !sets || sets.includes(s.name)))
    for (const name of binaryNames(set)) out[name] = path.join(buildDir(), 'bin', name);
  return out;
}

/** name -> absolute path of every file a set copies (the snapshot CRDs), for the e2e likewise. */
function files(sets) {
  const out = {};
  for (const set of SETS.filter((s) => !sets || sets.includes(s.name)))
    for (const [name, source] of Object.entries(set.files ? set.files.copy : {}))
      out[name] = path.join(filesDir(), name + path.extname(source));
  return out;
}

/** Builds the named sets and binaries (everything when none is named), in SETS' order, under the lock. */
function install(only) {
  const unknown = only.filter((name) => !SETS.some((set) => set.name === name) && !setOf(name));
  if (unknown.length)
    fail(
      `unknown set or binary ${unknown.join(', ')} (sets: ${SETS.map((set) => set.name).join(', ')}; binaries: ` +
        `${SETS.flatMap(binaryNames).join(', ')})`,
    );
  const release = lockBuild();
  try {
    for (const set of SETS) {
      const wanted = only.length === 0 || only.includes(set.name);
      const names = binaryNames(set).filter((name) => wanted || only.includes(name));
      if (names.length) installBinaries(names);
      if (wanted && set.files) installFiles(set);
    }
  } finally {
    release();
  }
}

module.exports = { binaries, files, cacheRoot, installFiles, SETS, MODULES, KUBERNETES_VERSION };

if (require.main === module) {
  if (process.argv.includes('--print'))
    process.stdout.write(`${JSON.stringify({ ...binaries(), ...files() }, null, 2)}\n`);
  else install(process.argv.slice(2).filter((arg) => !arg.startsWith('-')));
}
