'use strict';
// What the images are: the driver's recipe (deploy/image.json, the one list that deploy/Containerfile must match),
// the names the node and the tests use, and the check that the pinned Node.js satisfies package.json's engines.
// Node built-ins only (scripts/image runs before node_modules may exist).
const fs = require('fs');
const path = require('path');
const { describeBuild } = require('../build-info');
const { SETS } = require('../install-k8s-tools');

const root = path.resolve(__dirname, '..', '..');

/**
 * containerd's sandbox_image. kubelet 1.37 has no default of its own (the CRI runtime chooses); this is the pause
 * kubeadm v1.37.2 and Kubernetes' e2e image manifest name (cmd/kubeadm/app/constants PauseVersion 3.10.2).
 */
const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10.2';
/** Debian bookworm's busybox-static, tagged with its own version (the build checks that the binary reports it). */
const BUSYBOX_VERSION = '1.35.0';
const BUSYBOX_IMAGE = `docker.io/library/busybox:${BUSYBOX_VERSION}`;

/**
 * The images Kubernetes' storage suite names (k8s.io/kubernetes v1.37.2 test/utils/image/manifest.go), loaded under
 * those names so the suite's Pods (imagePullPolicy IfNotPresent) find them. agnhost is the real binary; the others'
 * Pods run only /bin/sh scripts (busybox, the exec test's nginx, multivolume's glibc-dns-testing), so each is our
 * busybox rootfs under the suite's name (docs/storage-suite.md).
 */
const SUITE_REGISTRY = 'registry.k8s.io/e2e-test-images';
const AGNHOST_IMAGE = `${SUITE_REGISTRY}/agnhost:2.66.1`;
const SUITE_SHELL_IMAGES = [
  { name: 'suite-busybox', ref: `${SUITE_REGISTRY}/busybox:1.37.0-2` },
  { name: 'suite-nginx', ref: `${SUITE_REGISTRY}/nginx:1.27.0-2` },
  { name: 'suite-glibc-dns-testing', ref: `${SUITE_REGISTRY}/glibc-dns-testing:2.1.1` },
];

/**
 * The sidecars built by scripts/install-k8s-tools.js, named as deploy/base/controller.yaml (and
 * deploy/components/snapshots, csi-snapshotter) names them, each with its own module's version (`versions`).
 */
const SIDECARS = ['csi-provisioner', 'csi-resizer', 'csi-snapshotter'].map((binary) => {
  const set = SETS.find((s) => Object.hasOwn(s.packages, binary));
  const version = set && (set.versions || {})[binary];
  if (!version) throw new Error(`scripts/install-k8s-tools.js builds no ${binary} of a known version`);
  return { name: binary, binary, version, ref: `registry.k8s.io/sig-storage/${binary}:${version}` };
});

function readJsonFile(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

/** deploy/image.json with the tag (the build's version) and the image reference filled in. */
function driverSpec(rootDir = root) {
  const spec = readJsonFile(path.join(rootDir, 'deploy', 'image.json'));
  const pkg = readJsonFile(path.join(rootDir, 'package.json'));
  // The build's version (scripts/build-info.js): the bare version only for a release, else `-dev.<commit>`.
  const { version } = describeBuild(rootDir);
  return { ...spec, tag: version, ref: `${spec.name}:${version}`, engines: (pkg.engines || {}).node };
}

function parseVersion(text) {
  const match = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(text.trim());
  return match ? { parts: [1, 2, 3].map((i) => Number(match[i] || 0)), full: match[3] !== undefined } : undefined;
}

function compare(a, b) {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

const HOLDS = { '>=': (c) => c >= 0, '>': (c) => c > 0, '<=': (c) => c <= 0, '<': (c) => c < 0, '=': (c) => c === 0 };

/**
 * Whether a version satisfies an npm engines range made of comparators (>=, >, <=, <, = or a bare version), space
 * for "and", `||` for "or". Anything else (^, ~, x-ranges, hyphens) is refused rather than guessed.
 */
function satisfies(versionText, range) {
  const version = parseVersion(versionText);
  if (!version || !version.full) throw new Error(`not a full version: "${versionText}"`);
  return range.split('||').some((alternative) =>
    alternative
      .trim()
      .replace(/(>=|<=|>|<|=)\s+/g, '$1')
      .split(/\s+/)
      .filter(Boolean)
      .every((comparator) => {
        const match = /^(>=|<=|>|<|=)?(.+)$/.exec(comparator);
        const bound = match && parseVersion(match[2]);
        if (!bound) throw new Error(`unsupported engines comparator "${comparator}" (only >=, >, <=, <, =)`);
        return HOLDS[match[1] || '='](compare(version.parts, bound.parts));
      }),
  );
}

module.exports = {
  AGNHOST_IMAGE,
  SUITE_SHELL_IMAGES,
  BUSYBOX_IMAGE,
  BUSYBOX_VERSION,
  PAUSE_IMAGE,
  SIDECARS,
  driverSpec,
  root,
  satisfies,
};
