'use strict';
// Images of a few static files, packed with umoci into an OCI layout and written by skopeo as docker-archive
// tars: pause (our own pause.c, gcc -static), busybox (Debian's busybox-static with its applet links) and the CSI
// sidecars from the Go builds of scripts/install-k8s-tools.js. The sidecars run as uid 0, as upstream's distroless
// images do, so a test sees what users get.
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { binaries } = require('../install-k8s-tools');
const { cacheRoot, contentKey, fileHash, publish, recipeHash, removeScratch, scratchDir } = require('./cache');
const { isStaticElf } = require('./elf');
const { requireTool, run, timed } = require('./run');
const {
  AGNHOST_IMAGE,
  BUSYBOX_IMAGE,
  BUSYBOX_VERSION,
  PAUSE_IMAGE,
  SIDECARS,
  SUITE_SHELL_IMAGES,
  root,
} = require('./spec');

const PAUSE_SOURCE = path.join(__dirname, 'pause.c');
const BUSYBOX = '/bin/busybox';
const RECIPE = [path.join(__dirname, 'small.js'), path.join(__dirname, 'elf.js')];

/** /etc/passwd and /etc/group: root, and the non-root user of the Pods that set none (distroless: 65532). */
const ACCOUNTS = {
  'etc/passwd': 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n',
  'etc/group': 'root:x:0:\nnonroot:x:65532:\n',
};

function gccVersion() {
  return run('gcc', ['--version'], { capture: true, quiet: true }).split('\n')[0];
}

/** The image's tar path: its name, and a key over its files and config and this recipe. */
function tarPath(name, inputs) {
  return path.join(cacheRoot(), name, `${contentKey({ inputs, recipe: recipeHash(RECIPE) })}.tar`);
}

/** Writes files into a rootfs: { 'rel/path': { copy | text | link | dir, mode } }. */
function populate(rootfs, files) {
  for (const [relative, entry] of Object.entries(files)) {
    const target = path.join(rootfs, relative);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    if (entry.dir) fs.mkdirSync(target, { recursive: true });
    else if (entry.link) fs.symlinkSync(entry.link, target);
    else if (entry.copy) fs.copyFileSync(entry.copy, target);
    else fs.writeFileSync(target, entry.text);
    if (entry.mode !== undefined) fs.chmodSync(target, entry.mode);
  }
}

/** umoci: an empty image, one layer of `files`, the config; skopeo: the docker-archive tar named `ref`. */
function pack(ref, files, config, tar) {
  requireTool('umoci', 'umoci');
  requireTool('skopeo', 'skopeo');
  const scratch = scratchDir(path.basename(path.dirname(tar)));
  try {
    const layout = path.join(scratch, 'layout');
    const bundle = path.join(scratch, 'bundle');
    const image = `${layout}:image`;
    run('umoci', ['init', '--layout', layout]);
    run('umoci', ['new', '--image', image]);
    run('umoci', ['unpack', '--image', image, bundle]);
    populate(path.join(bundle, 'rootfs'), files);
    run('umoci', ['repack', '--image', image, bundle]);
    const flags = [
      ...(config.entrypoint || []).map((arg) => `--config.entrypoint=${arg}`),
      ...(config.cmd || []).map((arg) => `--config.cmd=${arg}`),
      ...Object.entries(config.env || {}).map(([key, value]) => `--config.env=${key}=${value}`),
      `--config.user=${config.user}`,
    ];
    run('umoci', ['config', '--image', image, ...flags]);
    const policy = path.join(scratch, 'policy.json');
    fs.writeFileSync(policy, `${JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] })}\n`);
    const out = path.join(scratch, 'image.tar');
    run('skopeo', ['--policy', policy, 'copy', '--quiet', `oci:${image}`, `docker-archive:${out}:${ref}`]);
    publish(out, tar);
  } finally {
    removeScratch(scratch);
  }
}

function requireStatic(file, what) {
  if (!isStaticElf(file)) throw new Error(`${file} (${what}) is dynamically linked; the image holds no libc`);
}

function pauseImage() {
  const inputs = () => ({ ref: PAUSE_IMAGE, source: fileHash(PAUSE_SOURCE), gcc: gccVersion() });
  return {
    name: 'pause',
    ref: PAUSE_IMAGE,
    tar: () => tarPath('pause', inputs()),
    build(timings) {
      requireTool('gcc', 'gcc and libc6-dev');
      const tar = tarPath('pause', inputs());
      if (fs.existsSync(tar)) return tar;
      const scratch = scratchDir('pause-gcc');
      try {
        const binary = path.join(scratch, 'pause');
        timed(timings, 'gcc -static', () =>
          run('gcc', ['-static', '-Os', '-s', '-Wall', '-Wextra', '-Werror', '-o', binary, PAUSE_SOURCE]),
        );
        requireStatic(binary, 'gcc -static');
        // Upstream's pause runs as 65535, the sandbox's user when a Pod sets none.
        timed(timings, 'pack', () =>
          pack(
            PAUSE_IMAGE,
            { pause: { copy: binary, mode: 0o755 } },
            { entrypoint: ['/pause'], user: '65535:65535' },
            tar,
          ),
        );
      } finally {
        removeScratch(scratch);
      }
      return tar;
    },
  };
}

/** bin/sh, usr/bin/awk...: where busybox says each applet lives. */
function busyboxApplets() {
  return run(BUSYBOX, ['--list-full'], { capture: true, quiet: true })
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && line !== 'bin/busybox');
}

/** Debian's busybox-static with its applet links: the files of busybox and of the suite's shell-only images. */
function busyboxFiles() {
  if (!fs.existsSync(BUSYBOX)) throw new Error(`${BUSYBOX} is missing: install Debian's busybox-static (.ci/run does)`);
  requireStatic(BUSYBOX, "Debian's busybox-static; busybox is the dynamic one");
  const banner = spawnSync(BUSYBOX, [], { encoding: 'utf8' }).stdout.split('\n')[0];
  if (!banner.startsWith(`BusyBox v${BUSYBOX_VERSION} `))
    throw new Error(
      `${BUSYBOX} is "${banner}"; scripts/image/spec.js tags it ${BUSYBOX_VERSION}: update BUSYBOX_VERSION`,
    );
  const files = {
    'bin/busybox': { copy: BUSYBOX, mode: 0o755 },
    tmp: { dir: true, mode: 0o1777 },
    root: { dir: true, mode: 0o700 },
  };
  for (const applet of busyboxApplets()) files[applet] = { link: '/bin/busybox' };
  for (const [file, text] of Object.entries(ACCOUNTS)) files[file] = { text, mode: 0o644 };
  return files;
}

const SHELL_PATH = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' };

/**
 * GNU tools the suite's scripts call with flags busybox 1.35 lacks (`dd oflag=nocache`; the suite's own busybox is
 * 1.37), in /usr/local/bin (earlier on PATH than the applets), with the shared libraries ldd names. /bin/sh is
 * bash: busybox's shell runs its own applet for a name even when PATH has another binary first, and the scripts
 * use `let`, which dash lacks.
 */
const GNU_TOOLS = { 'usr/local/bin/dd': '/usr/bin/dd', 'bin/sh': '/usr/bin/bash' };

function gnuToolFiles() {
  const files = {};
  for (const [target, tool] of Object.entries(GNU_TOOLS)) {
    if (!fs.existsSync(tool)) throw new Error(`${tool} is missing: install Debian's coreutils and bash`);
    files[target] = { copy: tool, mode: 0o755 };
    for (const line of run('ldd', [tool], { capture: true, quiet: true }).split('\n')) {
      const library = /(\/\S+) \(0x/.exec(line)?.[1];
      if (library) files[library.slice(1)] = { copy: library, mode: 0o755 };
    }
  }
  return files;
}

/**
 * A busybox rootfs under `ref`: our busybox, and (withGnuTools) the suite's images whose Pods run only shell
 * commands.
 */
function busyboxImage(name = 'busybox', ref = BUSYBOX_IMAGE, withGnuTools = false) {
  const inputs = () => ({
    ref,
    busybox: fileHash(BUSYBOX),
    ...(withGnuTools ? { gnu: Object.values(GNU_TOOLS).map((tool) => fileHash(tool)) } : {}),
  });
  return {
    name,
    ref,
    tar: () => (fs.existsSync(BUSYBOX) ? tarPath(name, inputs()) : null),
    build(timings) {
      const files = { ...busyboxFiles(), ...(withGnuTools ? gnuToolFiles() : {}) };
      const tar = tarPath(name, inputs());
      if (fs.existsSync(tar)) return tar;
      timed(timings, 'pack', () => pack(ref, files, { cmd: ['sh'], env: SHELL_PATH, user: '0:0' }, tar));
      return tar;
    },
  };
}

/** agnhost (the suite's helper binary, built from k8s.io/kubernetes by install-k8s-tools) on the busybox rootfs. */
function agnhostImage() {
  const inputs = (binary) => ({ ref: AGNHOST_IMAGE, busybox: fileHash(BUSYBOX), agnhost: fileHash(binary) });
  const binary = () => binaries().agnhost;
  return {
    name: 'agnhost',
    ref: AGNHOST_IMAGE,
    tar: () => (fs.existsSync(BUSYBOX) && fs.existsSync(binary()) ? tarPath('agnhost', inputs(binary())) : null),
    build(timings) {
      const agnhost = goBinary('agnhost', timings);
      requireStatic(agnhost, 'a CGO_ENABLED=0 Go build');
      const tar = tarPath('agnhost', inputs(agnhost));
      if (fs.existsSync(tar)) return tar;
      const files = { ...busyboxFiles(), agnhost: { copy: agnhost, mode: 0o755 }, uploads: { dir: true, mode: 0o755 } };
      const config = { entrypoint: ['/agnhost'], cmd: ['pause'], env: SHELL_PATH, user: '0:0' };
      timed(timings, 'pack', () => pack(AGNHOST_IMAGE, files, config, tar));
      return tar;
    },
  };
}

/**
 * A Go binary of scripts/install-k8s-tools.js, built alone when it is missing (cached by version there): agnhost
 * comes before the storage suite's binary of its set (scripts/background-build.js builds the images first).
 */
function goBinary(name, timings) {
  const binary = binaries()[name];
  if (fs.existsSync(binary)) return binary;
  timed(timings, `go build (scripts/install-k8s-tools.js ${name})`, () =>
    run(process.execPath, [path.join(root, 'scripts', 'install-k8s-tools.js'), name]),
  );
  if (!fs.existsSync(binary)) throw new Error(`scripts/install-k8s-tools.js left no ${binary}`);
  return binary;
}

function sidecarImage(sidecar) {
  const inputs = (binary) => ({ ref: sidecar.ref, binary: fileHash(binary) });
  return {
    name: sidecar.name,
    ref: sidecar.ref,
    tar: () => {
      const binary = binaries()[sidecar.binary];
      return fs.existsSync(binary) ? tarPath(sidecar.name, inputs(binary)) : null;
    },
    build(timings) {
      const binary = goBinary(sidecar.binary, timings);
      requireStatic(binary, 'a CGO_ENABLED=0 Go build');
      const tar = tarPath(sidecar.name, inputs(binary));
      if (fs.existsSync(tar)) return tar;
      const files = { [sidecar.binary]: { copy: binary, mode: 0o755 }, tmp: { dir: true, mode: 0o1777 } };
      for (const [file, text] of Object.entries(ACCOUNTS)) files[file] = { text, mode: 0o644 };
      timed(timings, 'pack', () => pack(sidecar.ref, files, { entrypoint: [`/${sidecar.binary}`], user: '0:0' }, tar));
      return tar;
    },
  };
}

function smallImages() {
  const suite = [agnhostImage(), ...SUITE_SHELL_IMAGES.map(({ name, ref }) => busyboxImage(name, ref, true))];
  return [
    ...SIDECARS.map(sidecarImage),
    pauseImage(),
    busyboxImage(),
    ...suite.map((image) => ({ ...image, suiteOnly: true })),
  ];
}

module.exports = { busyboxApplets, smallImages };
