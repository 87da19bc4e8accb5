/**
 * Looking at real mounts and loop devices from tests, and undoing those a test made under its temporary root
 * before the root is removed (rm -r across a mount point would delete the mounted volume's files).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseMountInfoLine } from '../../../storage/host/mounts';
import { loopDevicesUnder, mountsUnder } from '../../sanity/leaks';

export function releaseMountsUnder(root: string): void {
  if (!fs.existsSync(root)) return;
  const roots = [fs.realpathSync(root)];
  // Rounds: a filesystem holding an image cannot be unmounted until the image's device is detached.
  for (let round = 0; round < 10; round++) {
    const mountPoints = mountsUnder(roots);
    if (mountPoints.length === 0 && loopDevicesUnder(roots).length === 0) return;
    for (const mountPoint of mountPoints) tryRun('umount', [mountPoint]);
    // Listed after the unmounts, and detached by name at once. A device a test detached while it was mounted goes
    // with the unmount, and its number is the next attach's a moment later (the lowest free one): detaching a name
    // listed before the unmount would detach another suite's device, the likely cause of CI's dumpe2fs "Invalid
    // argument" on a freshly attached device.
    for (const { device } of loopDevicesUnder(roots)) tryRun('losetup', ['--detach', device]);
  }
}

function tryRun(command: string, args: string[]): void {
  try {
    execFileSync(command, args, { stdio: 'ignore' });
  } catch {
    // busy for now; the next round tries again
  }
}

/** Devices attached to this file, as `losetup -j` reports them. */
export function loopDevicesOf(file: string): string[] {
  return execFileSync('losetup', ['--noheadings', '--output', 'NAME', '--associated', file], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
}

/** True when something is mounted exactly at target. */
export function isMountPoint(target: string): boolean {
  if (!fs.existsSync(target)) return false;
  const real = fs.realpathSync(target);
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .some((line) => parseMountInfoLine(line)?.mountPoint === real);
}

/** Online ext4 growth needs CAP_SYS_RESOURCE; some sandboxes run root without it. */
export function hasSysResource(): boolean {
  const line = fs.readFileSync('/proc/self/status', 'utf8').match(/^CapEff:\s*([0-9a-f]+)$/m);
  return line !== null && ((BigInt(`0x${line[1]}`) >> 24n) & 1n) === 1n;
}

/** The size of the filesystem mounted at target, as df reports it. */
export function dfBytes(target: string): number {
  const out = execFileSync('df', ['--block-size=1', '--output=size', target], { encoding: 'utf8' });
  return Number(out.trim().split('\n').pop());
}

/** The size of a block device, as blockdev reports it. */
export function blockdevSize(device: string): number {
  return Number(execFileSync('blockdev', ['--getsize64', device], { encoding: 'utf8' }).trim());
}

/** How a test's own pool filesystem is made: an XFS with reflinks, and an ext4, which has none. */
const POOL_FILESYSTEMS = {
  'xfs-reflink': ['mkfs.xfs', '-q', '-f', '-m', 'reflink=1'],
  ext4: ['mkfs.ext4', '-q', '-F'],
} as const;
export type PoolFilesystem = keyof typeof POOL_FILESYSTEMS;

/**
 * A filesystem of `kind` on a sparse image, mounted at `mountPoint` (its lost+found removed, so it is an empty
 * directory): whether the pool has reflinks is then the test's choice, not the host's. releaseMountsUnder undoes it
 * when both lie under its root. Returns the loop device.
 */
export function mountPoolFilesystem(kind: PoolFilesystem, image: string, mountPoint: string, bytes: number): string {
  fs.writeFileSync(image, '');
  fs.truncateSync(image, bytes);
  const device = execFileSync('losetup', ['-f', '--show', image], { encoding: 'utf8' }).trim();
  const [mkfs, ...args] = POOL_FILESYSTEMS[kind];
  execFileSync(mkfs, [...args, device]);
  fs.mkdirSync(mountPoint, { recursive: true });
  execFileSync('mount', [device, mountPoint]);
  fs.rmSync(path.join(mountPoint, 'lost+found'), { recursive: true, force: true });
  return device;
}

/**
 * Whether the filesystem mounted at mountPoint is frozen: a freeze of a frozen filesystem fails with EBUSY, one of a
 * thawed filesystem succeeds and is undone at once. Only ever on a loop device's mount, checked first, so that a
 * test can never freeze the machine's own filesystems.
 */
export function isFrozen(mountPoint: string): boolean {
  const real = fs.realpathSync(mountPoint);
  const top = fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .flatMap((line) => parseMountInfoLine(line) ?? [])
    .filter((entry) => entry.mountPoint === real)
    .pop();
  if (!top?.source.startsWith('/dev/loop')) throw new Error(`${mountPoint} is not a loop device's mount point`);
  try {
    execFileSync('fsfreeze', ['--freeze', real], { stdio: 'pipe' });
  } catch (error) {
    if (/busy/i.test(String((error as { stderr?: Buffer }).stderr))) return true;
    throw error;
  }
  execFileSync('fsfreeze', ['--unfreeze', real]);
  return false;
}
