'use strict';
// Whether dist/ was built from the sources as they are now (Node built-ins only: scripts/setup.js runs it,
// possibly before node_modules exists). The build's inputs are hashed, content and path, and the hash is
// recorded in dist/ after a successful build; any change, addition or removal of an input rebuilds. Content
// rather than mtimes: a checkout, a stash or a copy can make a changed file look older than the build.
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { ASSETS } = require('./copy-assets');

/** Code and configuration that tsc, proto generation and the workflow bundle read. */
const INPUT_EXTENSIONS = new Set(['.ts', '.js', '.mjs', '.cjs', '.json', '.proto']);
/** Never inputs: outputs, dependencies (package-lock.json stands for them), tools, data and reports. */
const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'coverage', 'test-artifacts', path.join('csi', 'generated')]);
/** Where the fingerprint of the last successful build is kept, and outputs every build leaves. */
const STAMP = path.join('dist', '.build-inputs.json');
const OUTPUTS = [
  path.join('dist', 'cli', 'main.js'),
  path.join('dist', 'workflow-bundle.js'),
  ...ASSETS.map((a) => path.join('dist', a)),
];

function inputFiles(root) {
  const files = [];
  const walk = (relativeDir) => {
    for (const entry of fs.readdirSync(path.join(root, relativeDir), { withFileTypes: true })) {
      const relative = path.join(relativeDir, entry.name);
      // Dot entries (.git, .tools, .data, .ci) are not sources of the build.
      if (entry.name.startsWith('.') || SKIPPED_DIRS.has(relative)) continue;
      if (entry.isDirectory()) walk(relative);
      else if (entry.isFile() && INPUT_EXTENSIONS.has(path.extname(entry.name))) files.push(relative);
    }
  };
  walk('');
  for (const asset of ASSETS) if (!files.includes(asset)) files.push(asset);
  return files.sort();
}

/** One hash over every input's path and content. */
function inputsFingerprint(root) {
  const hash = crypto.createHash('sha256');
  for (const file of inputFiles(root)) {
    hash.update(`${file}\0`);
    try {
      hash.update(fs.readFileSync(path.join(root, file)));
    } catch {
      hash.update('(missing)');
    }
    hash.update('\0');
  }
  return hash.digest('hex');
}

/** Fresh when every output exists and the recorded fingerprint is the current one. */
function isBuildFresh(root, fingerprint) {
  if (!OUTPUTS.every((output) => fs.existsSync(path.join(root, output)))) return false;
  try {
    return JSON.parse(fs.readFileSync(path.join(root, STAMP), 'utf8')).inputs === fingerprint;
  } catch {
    return false;
  }
}

/** Before a build: a build that fails or is interrupted must not look fresh. */
function forgetBuild(root) {
  fs.rmSync(path.join(root, STAMP), { force: true });
}

/** After a successful build, with the fingerprint taken before it started (a change during the build rebuilds). */
function recordBuild(root, fingerprint) {
  fs.mkdirSync(path.join(root, 'dist'), { recursive: true });
  fs.writeFileSync(path.join(root, STAMP), `${JSON.stringify({ inputs: fingerprint }, null, 2)}\n`);
}

module.exports = { inputFiles, inputsFingerprint, isBuildFresh, forgetBuild, recordBuild };
