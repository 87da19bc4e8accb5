'use strict';
// What the scripts that build pinned Go tools share (install-tools, install-k8s-tools,
// install-temporal-server). Node built-ins only: they run from scripts/setup.js, possibly before
// node_modules exists.
const { spawnSync } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');

/** A fail() that prints with the script's name and exits 1: these scripts fail, they never skip. */
function makeFail(script) {
  return (message) => {
    console.error(`${script}: ${message}`);
    process.exit(1);
  };
}

function sha256(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** The parsed file, or undefined when it is missing or not JSON (a stamp that cannot be read is no stamp). */
function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The Go toolchain ($GO or `go`) and its version line; fails with `explain(why)` when it does not run. */
function goCommand(fail, explain) {
  const go = process.env.GO || 'go';
  const probe = spawnSync(go, ['version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    const why = probe.error ? probe.error.message : (probe.stderr || '').trim() || `exit ${probe.status}`;
    fail(explain(why));
  }
  return { go, version: probe.stdout.trim() };
}

/** The module version recorded in a binary's build info, to check that the build used what we pinned. */
function builtVersion(go, binary, module) {
  const result = spawnSync(go, ['version', '-m', binary], { encoding: 'utf8' });
  if (result.error || result.status !== 0) return undefined;
  for (const line of result.stdout.split('\n')) {
    const fields = line.trim().split(/\s+/);
    if ((fields[0] === 'mod' || fields[0] === 'dep') && fields[1] === module) return fields[2];
  }
  return undefined;
}

module.exports = { makeFail, sha256, readJson, goCommand, builtVersion };
