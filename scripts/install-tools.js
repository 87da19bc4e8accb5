'use strict';
// Installs the pinned test tools into .tools/bin (Node built-ins only: runs from scripts/setup.js,
// possibly before node_modules exists). Today that is csi-sanity, built with the Go toolchain.
//
// A missing Go toolchain is a failure, not a skip: the csi-sanity test in `npm test` needs the
// binary, and CI must not pass without running it.
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { builtVersion, goCommand, makeFail, readJson, sha256 } = require('./go-build-kit');

const root = path.resolve(__dirname, '..');
const bin = path.join(root, '.tools', 'bin');

/** Pinned; `go list -m -versions github.com/kubernetes-csi/csi-test/v5` lists the published ones. */
const CSI_SANITY = {
  name: 'csi-sanity',
  module: 'github.com/kubernetes-csi/csi-test/v5',
  package: 'github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity',
  version: 'v5.6.0',
};

const fail = makeFail('install-tools');

/** The stamp written after a successful install: which version, and the hash of the binary it produced. */
function stampPath(tool) {
  return path.join(bin, `${tool.name}.stamp.json`);
}

function readStamp(tool) {
  const stamp = readJson(stampPath(tool));
  return stamp && typeof stamp === 'object' ? stamp : undefined;
}

/** Up to date when the binary exists and is the very file the stamp describes for the pinned version. */
function isInstalled(tool) {
  const binary = path.join(bin, tool.name);
  const stamp = readStamp(tool);
  if (!stamp || stamp.module !== tool.module || stamp.version !== tool.version) return false;
  try {
    fs.accessSync(binary, fs.constants.X_OK);
  } catch {
    return false;
  }
  return stamp.sha256 === sha256(binary);
}

function requireGo() {
  return goCommand(
    fail,
    (why) =>
      `the Go toolchain is required to install ${CSI_SANITY.name} ${CSI_SANITY.version} (${why}).\n` +
      `  Install Go (https://go.dev/dl/; csi-test ${CSI_SANITY.version} needs go 1.25 or later) and put \`go\` on PATH, or set GO=/path/to/go.\n` +
      `  ${CSI_SANITY.name} is part of \`npm test\`; it is never skipped.`,
  );
}

function install(tool) {
  const binary = path.join(bin, tool.name);
  if (isInstalled(tool)) {
    console.error(`install-tools: ${tool.name} ${tool.version} is installed (${path.relative(root, binary)})`);
    return;
  }
  const { go, version } = requireGo();
  const spec = `${tool.package}@${tool.version}`;
  console.error(`install-tools: installing ${tool.name}: ${go} install ${spec} (${version}, GOBIN=${bin})`);
  fs.mkdirSync(bin, { recursive: true });
  fs.rmSync(stampPath(tool), { force: true });
  const result = spawnSync(go, ['install', spec], {
    cwd: root,
    stdio: 'inherit',
    // `go install pkg@version` builds outside any module: no go.mod or go.work of ours can change what it builds.
    env: { ...process.env, GOBIN: bin },
  });
  if (result.error) fail(`could not run ${go}: ${result.error.message}`);
  if (result.status !== 0) fail(`\`${go} install ${spec}\` exited with ${result.signal || `code ${result.status}`}`);
  if (!fs.existsSync(binary)) fail(`\`${go} install ${spec}\` succeeded but ${binary} does not exist`);
  const built = builtVersion(go, binary, tool.module);
  if (built !== tool.version)
    fail(`${binary} was built from ${tool.module} ${built || '(unknown)'}, not ${tool.version}`);
  const stamp = { module: tool.module, version: tool.version, sha256: sha256(binary), go: version };
  fs.writeFileSync(stampPath(tool), `${JSON.stringify(stamp, null, 2)}\n`);
  console.error(`install-tools: ${tool.name} ${tool.version} installed (${path.relative(root, binary)})`);
}

install(CSI_SANITY);
