'use strict';
// Where built images and their parts live (~/.cache/durable-csi/images, or $DURABLE_CSI_IMAGES), and the content
// keys that name them: a part is rebuilt only when something it is made from changes.
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

function cacheRoot() {
  if (process.env.DURABLE_CSI_IMAGES) return path.resolve(process.env.DURABLE_CSI_IMAGES);
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'durable-csi', 'images');
}

/** JSON with sorted keys: the same inputs always give the same text, whatever order they were written in. */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .filter((key) => value[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`)
      .join(',')}}`;
  return JSON.stringify(value);
}

/** 16 hex digits of sha256 over the canonical JSON of everything a part is made from. */
function contentKey(inputs) {
  return crypto.createHash('sha256').update(canonical(inputs)).digest('hex').slice(0, 16);
}

function fileHash(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** Hash of the files that say how a part is built: changing the recipe rebuilds what it made. */
function recipeHash(files) {
  return contentKey(files.map((file) => [path.basename(file), fileHash(file)]));
}

/** A fresh directory under the cache (same filesystem, so finished parts are renamed into place atomically). */
function scratchDir(label) {
  const dir = path.join(cacheRoot(), 'tmp');
  fs.mkdirSync(dir, { recursive: true });
  return fs.mkdtempSync(path.join(dir, `${label}-`));
}

/** Mount points at or under a directory (buildah's chroot runs mount /proc, /dev... and must have unmounted them). */
function mountsUnder(dir) {
  const prefix = path.resolve(dir);
  return fs
    .readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((line) => (line.split(' ')[1] || '').replace(/\\040/g, ' '))
    .filter((point) => point === prefix || point.startsWith(`${prefix}/`));
}

/** Removes a scratch directory, refusing to recurse through anything still mounted inside it. */
function removeScratch(dir) {
  const mounted = mountsUnder(dir);
  if (mounted.length) throw new Error(`not removing ${dir}: still mounted there: ${mounted.join(', ')}`);
  fs.rmSync(dir, { recursive: true, force: true });
}

/** Moves a finished file or directory to its keyed place and removes the other keys of the same part. */
function publish(built, final) {
  fs.mkdirSync(path.dirname(final), { recursive: true });
  fs.rmSync(final, { recursive: true, force: true });
  fs.renameSync(built, final);
  for (const entry of fs.readdirSync(path.dirname(final)))
    if (entry !== path.basename(final))
      fs.rmSync(path.join(path.dirname(final), entry), { recursive: true, force: true });
}

module.exports = {
  cacheRoot,
  canonical,
  contentKey,
  fileHash,
  mountsUnder,
  publish,
  recipeHash,
  removeScratch,
  scratchDir,
};
