import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

function isUnder(file: string, roots: readonly string[]): boolean {
  return roots.some((root) => file === root || file.startsWith(`${root}${path.sep}`));
}

/** Mount points under any of roots, from /proc/self/mountinfo (field 5, octal-escaped), deepest first. */
export function mountsUnder(roots: readonly string[]): string[] {
  if (!fs.existsSync('/proc/self/mountinfo')) return [];
  const mounts = fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((field): field is string => field !== undefined)
    .map((field) => field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))))
    .filter((mount) => isUnder(mount, roots));
  return [...new Set(mounts)].sort((a, b) => b.length - a.length);
}

/** Loop devices whose backing file is under any of roots, as "/dev/loopN -> file". */
export function loopDevicesUnder(roots: readonly string[]): { device: string; backingFile: string }[] {
  const sysBlock = '/sys/block';
  if (!fs.existsSync(sysBlock)) return [];
  const found: { device: string; backingFile: string }[] = [];
  for (const name of fs.readdirSync(sysBlock).filter((entry) => entry.startsWith('loop'))) {
    let backingFile: string;
    try {
      backingFile = fs.readFileSync(path.join(sysBlock, name, 'loop', 'backing_file'), 'utf8').trim();
    } catch {
      continue; // not attached
    }
    if (isUnder(backingFile.replace(/ \(deleted\)$/, ''), roots)) found.push({ device: `/dev/${name}`, backingFile });
  }
  return found;
}

/**
 * The pool's directories that hold a volume's or a snapshot's data, record, journal intent or staging record
 * (docs/storage.md, "On-disk layout"). After csi-sanity, which deletes every volume and snapshot it creates, all are
 * empty.
 */
const POOL_CONTENT_DIRS = [
  'volumes',
  'records',
  'journal',
  'staging',
  path.join('snapshots', 'data'),
  path.join('snapshots', 'records'),
  path.join('snapshots', 'journal'),
];

/** What is left in a pool's volume and snapshot directories, as paths relative to the pool. */
export function leftInPool(pool: string): string[] {
  return POOL_CONTENT_DIRS.flatMap((dir) => {
    const full = path.join(pool, dir);
    return fs.existsSync(full) ? fs.readdirSync(full).map((entry) => path.join(dir, entry)) : [];
  }).sort();
}

/**
 * Best-effort cleanup after a failed run, so that a leak does not outlive the test: lazy unmounts, then loop
 * detaches. Returns what could not be cleaned.
 */
export function cleanUp(roots: readonly string[]): string[] {
  const left: string[] = [];
  for (const mount of mountsUnder(roots)) {
    const result = spawnSync('umount', ['-l', mount], { encoding: 'utf8' });
    if (result.status !== 0) left.push(`mount ${mount}: umount -l failed: ${(result.stderr || '').trim()}`);
  }
  for (const { device, backingFile } of loopDevicesUnder(roots)) {
    const result = spawnSync('losetup', ['-d', device], { encoding: 'utf8' });
    if (result.status !== 0)
      left.push(`${device} (${backingFile}): losetup -d failed: ${(result.stderr || '').trim()}`);
  }
  return left;
}
