/**
 * What is mounted where, read from /proc/self/mountinfo (no findmnt), the block devices mounts show, and the mount(8)
 * and fsfreeze(8) calls the node makes. Paths from the CO are only ever used as mount targets; sources are always
 * inside the pool or loop devices.
 *
 * A volume is recognised in mountinfo by the filesystem a mount shows (major:minor) and, for bind mounts of a
 * directory or a device node, by the path inside that filesystem (the "root" field), so a bind mount of a
 * bind mount is still recognised as the same volume.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import { isNotFound } from './files';
import { ToolError, runTool } from './tools';

export interface MountEntry {
  majorMinor: string;
  /** The path inside the mounted filesystem that appears at mountPoint ("/" unless it is a bind mount). */
  root: string;
  mountPoint: string;
  readonly: boolean;
  fsType: string;
  source: string;
  /** The filesystem's own options (after the source): where quotas show (xfs `prjquota`, ext4 `prjquota`). */
  superOptions: string[];
}

/** A volume's mounts: those of this filesystem, and (when root is given) showing exactly this path in it. */
export interface MountMatcher {
  majorMinor: string;
  root?: string;
}

const MOUNTINFO = '/proc/self/mountinfo';

export async function readMounts(): Promise<MountEntry[]> {
  const text = await fs.readFile(MOUNTINFO, 'utf8');
  return text.split('\n').flatMap((line) => parseMountInfoLine(line) ?? []);
}

/** `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue` (proc(5)). */
export function parseMountInfoLine(line: string): MountEntry | undefined {
  const fields = line.split(' ');
  const separator = fields.indexOf('-', 6);
  const [, , majorMinor, root, mountPoint, options] = fields;
  const fsType = fields[separator + 1];
  const source = fields[separator + 2];
  const superOptions = fields[separator + 3];
  if (separator < 0 || !majorMinor || !root || !mountPoint || !options || !fsType || source === undefined) {
    return undefined;
  }
  return {
    majorMinor,
    root: unescapeOctal(root),
    mountPoint: unescapeOctal(mountPoint),
    readonly: options.split(',').includes('ro'),
    fsType,
    source: unescapeOctal(source),
    superOptions: superOptions ? superOptions.split(',') : [],
  };
}

/** mountinfo writes space, tab, newline and backslash as \040, \011, \012 and \134. */
function unescapeOctal(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** Linux's encoding of dev_t (major and minor are split across the 64 bits). */
export function majorMinorOf(dev: bigint): string {
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & 0xfffff000n);
  const minor = (dev & 0xffn) | ((dev >> 12n) & 0xffffff00n);
  return `${major}:${minor}`;
}

const SYS_BLOCK = '/sys/class/block';

/** The device's size as the kernel sees it (what `blockdev --getsize64` reports). */
export async function deviceBytes(device: string): Promise<number> {
  const sectors = await fs.readFile(path.join(SYS_BLOCK, path.basename(device), 'size'), 'utf8');
  return Number(sectors.trim()) * 512;
}

/**
 * Whether the kernel refuses writes to the block device (a `losetup --read-only` device, `blockdev --setro`):
 * /sys/class/block/<name>/ro, which follows the device node's real name.
 */
export async function isReadOnlyDevice(device: string): Promise<boolean> {
  const name = path.basename(await fs.realpath(device));
  return (await fs.readFile(path.join(SYS_BLOCK, name, 'ro'), 'utf8')).trim() === '1';
}

/**
 * Recognises bind mounts of `source` (a directory or a device node): the filesystem holding it, and its path
 * inside that filesystem, worked out from the mount it lies under.
 */
export async function bindMatcherOf(source: string, mounts: MountEntry[]): Promise<MountMatcher> {
  const { real, holder } = await mountHolding(source, mounts);
  return { majorMinor: holder.majorMinor, root: path.posix.join(holder.root, path.relative(holder.mountPoint, real)) };
}

/** The mount `source` (an existing path) lies under, and the path with its symbolic links resolved. */
export async function mountHolding(
  source: string,
  mounts: MountEntry[],
): Promise<{ real: string; holder: MountEntry }> {
  const real = await fs.realpath(source);
  const majorMinor = majorMinorOf((await fs.stat(real, { bigint: true })).dev);
  const holders = mounts.filter((entry) => isUnder(real, entry.mountPoint));
  // The deepest mount holding the path; by path alone where st_dev is not what mountinfo shows (btrfs subvolumes).
  const holder = deepest(holders.filter((entry) => entry.majorMinor === majorMinor)) ?? deepest(holders);
  if (!holder) throw new DriverError(FailureType.Internal, `cannot find the mount that holds ${real}`);
  return { real, holder };
}

/** The longest mount point; of equal ones the last mounted (the one visible). */
function deepest(entries: MountEntry[]): MountEntry | undefined {
  return entries.reduce<MountEntry | undefined>(
    (best, entry) => (best && best.mountPoint.length > entry.mountPoint.length ? best : entry),
    undefined,
  );
}

export function showsVolume(entry: MountEntry, matchers: MountMatcher[]): boolean {
  return matchers.some(
    (matcher) => entry.majorMinor === matcher.majorMinor && (matcher.root === undefined || matcher.root === entry.root),
  );
}

/** The path with symbolic links resolved, as mountinfo shows it; undefined when nothing is there. */
export async function realPathIfExists(target: string): Promise<string | undefined> {
  try {
    return await fs.realpath(target);
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/** The mount visible at target (the last one mounted there), if target is a mount point at all. */
export async function topMountAt(target: string, mounts?: MountEntry[]): Promise<MountEntry | undefined> {
  const real = await realPathIfExists(target);
  if (real === undefined) return undefined;
  return (mounts ?? (await readMounts())).filter((entry) => entry.mountPoint === real).pop();
}

/** True when target is a mount point showing this volume. */
export async function isMountOf(target: string, matchers: MountMatcher[]): Promise<boolean> {
  const top = await topMountAt(target);
  return top !== undefined && showsVolume(top, matchers);
}

/** Never a device file or a set-user-ID program that works from inside a volume (docs/security.md). */
const SAFE_DEFAULTS = ['nodev', 'nosuid'];

/**
 * A restored or cloned xfs volume is a block copy carrying its source's filesystem UUID, and XFS refuses to mount a
 * second filesystem with a UUID already mounted ("duplicate UUID"): without nouuid, a restore or clone could not be
 * used while its source is (the storage suite's snapshot and clone specs).
 */
const FS_TYPE_FLAGS: Record<string, string[]> = { xfs: ['nouuid'] };

export async function mountFilesystem(device: string, target: string, fsType: string, flags: string[]) {
  const options = ['-o', [...SAFE_DEFAULTS, ...(FS_TYPE_FLAGS[fsType] ?? []), ...flags].join(',')];
  await runTool('mount', ['-t', fsType, ...options, assertAbsolute(device), assertAbsolute(target)]);
}

/**
 * A bind mount, remounted nodev,nosuid (and ro when asked): a bind mount ignores options until it is remounted.
 * A device node (raw block) cannot be nodev, and a read-only mount does not stop writes to a device node, so a
 * read-only block bind needs a device the kernel itself keeps read-only (a read-only loop device); it is then
 * remounted ro,nosuid so that the mount table says what it is.
 */
export async function bindMount(
  source: string,
  target: string,
  options: { readonly: boolean; device?: boolean; flags?: string[] },
): Promise<void> {
  if (options.device && options.readonly && !(await isReadOnlyDevice(source))) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `a read-only bind mount of the device ${source} would not stop writes to it`,
    );
  }
  await runTool('mount', ['--bind', assertAbsolute(source), assertAbsolute(target)]);
  if (options.device && !options.readonly) return;
  try {
    await runTool('mount', [
      '-o',
      [
        'remount',
        'bind',
        ...(options.device ? ['nosuid'] : SAFE_DEFAULTS),
        ...(options.flags ?? []),
        ...(options.readonly ? ['ro'] : []),
      ].join(','),
      target,
    ]);
  } catch (error) {
    await unmount(target).catch(() => undefined);
    throw error;
  }
}

/**
 * A mount is busy while anything holds it, here or in a mount namespace that shares it (the kernel checks the
 * propagated copies too): a container runtime's or another tool's fresh namespace can hold it for a moment. Such a
 * moment is waited out here rather than answered INTERNAL for the CO to retry; a mount still busy after that is.
 */
const BUSY_RETRIES = 10;
const BUSY_WAIT_MS = 200;

export async function unmount(target: string): Promise<void> {
  const args = [assertAbsolute(target)];
  for (let attempt = 1; ; attempt++) {
    try {
      await runTool('umount', args);
      return;
    } catch (error) {
      const busy = error instanceof ToolError && /target is busy/i.test(error.stderr);
      if (!busy || attempt >= BUSY_RETRIES) throw error;
      await new Promise((resolve) => setTimeout(resolve, BUSY_WAIT_MS));
    }
  }
}

/** Unmounts every mount of this volume stacked at target; leaves a mount of anything else in place. */
export async function unmountVolumeAt(target: string, matchers: MountMatcher[]): Promise<void> {
  while (await isMountOf(target, matchers)) await unmount(target);
}

/**
 * fsfreeze(8): flushes the filesystem mounted at mountPoint and holds every writer until the thaw. It acts on
 * whatever filesystem holds the path, so callers pass only a mount point they checked shows the filesystem they mean.
 */
export async function freezeFilesystem(mountPoint: string): Promise<void> {
  await runTool('fsfreeze', ['--freeze', assertAbsolute(mountPoint)]);
}

/** Thaws the filesystem mounted at mountPoint; one that is not frozen (EINVAL) is left as it is. */
export async function thawFilesystem(mountPoint: string): Promise<void> {
  try {
    await runTool('fsfreeze', ['--unfreeze', assertAbsolute(mountPoint)]);
  } catch (error) {
    if (!(error instanceof ToolError && /invalid argument/i.test(error.stderr))) throw error;
  }
}

function isUnder(candidate: string, dir: string): boolean {
  return dir === '/' || candidate === dir || candidate.startsWith(`${dir}/`);
}

/** Every path reaching mount(8) is absolute: it can never be read as an option. */
function assertAbsolute(target: string): string {
  if (!path.isAbsolute(target)) throw new DriverError(FailureType.InvalidArgument, `${target} is not an absolute path`);
  return target;
}
