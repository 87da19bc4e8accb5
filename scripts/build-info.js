'use strict';
// What a build is, written to dist/build-info.json by every build and by scripts/setup.js (a new commit changes no
// input of tsc, so setup refreshes it even when it skips the build). Node built-ins only.
//
// Only a release is named by its bare version: package.json says X.Y.Z (no pre-release part) and the build is of
// a clean checkout, which holds only at the release commit (the commit after it moves package.json to the next
// -dev version: CHANGELOG.md, docs/releases.md). Every other build carries its commit, `0.3.0-dev.<commit>`, and
// `.dirty` when tracked files differ from it, so that no build can be taken for a release it is not: the image
// tag, `durable-csi --version` and the node record's agentVersion all say this.
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const FILE = path.join('dist', 'build-info.json');

function git(args, cwd) {
  const result = spawnSync('git', args, { cwd, encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : undefined;
}

/** { version, commit, release }: commit undefined outside a git checkout (then never a release). */
function describeBuild(dir = root) {
  const { version: base } = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const commit = git(['rev-parse', 'HEAD'], dir);
  const dirty = commit !== undefined && git(['status', '--porcelain', '--untracked-files=no'], dir) !== '';
  const release = commit !== undefined && !dirty && !base.includes('-');
  if (release) return { version: base, commit, release };
  const devBase = base.includes('-') ? base : `${base}-dev`;
  const version = `${devBase}.${commit ? commit.slice(0, 12) : 'unknown'}${dirty ? '.dirty' : ''}`;
  return { version, commit, release };
}

/**
 * The newest release CHANGELOG.md has an entry for (its first `## X.Y.Z (date)` heading): what deploy/ and the chart
 * name between releases, since a -dev version has no image anyone published (docs/releases.md).
 */
function newestRelease(dir = root) {
  const changelog = fs.readFileSync(path.join(dir, 'CHANGELOG.md'), 'utf8');
  const match = /^## (\d+\.\d+\.\d+) \(\d{4}-\d{2}-\d{2}\)$/m.exec(changelog);
  if (!match) throw new Error('CHANGELOG.md has no release heading ("## X.Y.Z (YYYY-MM-DD)")');
  return match[1];
}

function writeBuildInfo(dir = root) {
  const info = describeBuild(dir);
  const file = path.join(dir, FILE);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(info, null, 2)}\n`);
  return info;
}

module.exports = { describeBuild, newestRelease, writeBuildInfo, BUILD_INFO_FILE: FILE };
if (require.main === module) process.stdout.write(`${writeBuildInfo().version}\n`);
