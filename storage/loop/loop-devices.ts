/**
 * Loop devices over the image files of a pool, through losetup(8), and the image files themselves. The attachment is
 * found again from the file (`losetup -j`), never remembered, so it survives agent restarts; the device name may
 * change across reboots. An image has real capacity, not a sparse promise: fallocate(1) reserves its blocks, so a
 * full pool filesystem refuses a create at once instead of failing writes inside the volume later.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import { fsyncDir, fsyncPath, isNotFound } from '../host/files';
import { isReadOnlyDevice } from '../host/mounts';
import { ToolError, runTool } from '../host/tools';

const SYS_BLOCK = '/sys/class/block';
/** A detach is deferred while something (udev, blkid) still has the device open; wait that long for it. */
const DETACH_WAIT_MS = 10_000;

/** Devices attached to this file, in losetup's order; empty when none (or when the file is gone). */
export async function attachedDevices(file: string): Promise<string[]> {
  const out = await runTool('losetup', ['--noheadings', '--output', 'NAME', '--associated', file]);
  return out
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith('/dev/'));
}

/** The file's devices by kind, from one losetup run: the read-write one staging uses, the readers' read-only ones. */
export async function devicesByKind(file: string): Promise<{ readWrite: string[]; readOnly: string[] }> {
  const kinds = { readWrite: [] as string[], readOnly: [] as string[] };
  for (const device of await attachedDevices(file))
    ((await isReadOnlyDevice(device)) ? kinds.readOnly : kinds.readWrite).push(device);
  return kinds;
}

/** The file's devices of one kind (see devicesByKind). */
export async function devicesOfKind(file: string, readOnly: boolean): Promise<string[]> {
  const kinds = await devicesByKind(file);
  return readOnly ? kinds.readOnly : kinds.readWrite;
}

/**
 * The file's read-write (or, with readOnly, read-only) device, attaching one if it has none: attaching again after
 * a crash or restart is a no-op. A read-only device is what a reader of a raw block volume gets: the kernel refuses
 * its writes, which a read-only bind mount of a device node does not.
 */
export async function attachDevice(file: string, readOnly = false): Promise<{ device: string; fresh: boolean }> {
  const [existing] = await devicesOfKind(file, readOnly);
  if (existing) return { device: existing, fresh: false };
  const device = (await runTool('losetup', [...(readOnly ? ['--read-only'] : []), '--find', '--show', file])).trim();
  if (!device.startsWith('/dev/'))
    throw new DriverError(FailureType.Internal, `losetup printed "${device}" for ${file}`);
  return { device, fresh: true };
}

/** Detaches every device of the file (or only `which` of them) and waits until the kernel has let them go. */
export async function detachDevices(file: string, which?: string[]): Promise<void> {
  const chosen = (devices: string[]): string[] => (which ? devices.filter((d) => which.includes(d)) : devices);
  for (const device of chosen(await attachedDevices(file))) await runTool('losetup', ['--detach', device]);
  const until = Date.now() + DETACH_WAIT_MS;
  for (;;) {
    const left = chosen(await attachedDevices(file));
    if (left.length === 0) return;
    if (Date.now() > until) {
      throw new DriverError(FailureType.Unavailable, `${left.join(', ')} still attached to ${file}: device busy`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Makes the device see the file's current size (after the file grew). */
export async function refreshDevice(device: string): Promise<void> {
  await runTool('losetup', ['--set-capacity', device]);
}

const DETACHING = new Set(['ENODEV', 'ENXIO']);

/** Every attached loop device and its backing file, from sysfs (one read, no tool run per device). */
export async function loopAttachments(): Promise<{ device: string; file: string }[]> {
  const attachments: { device: string; file: string }[] = [];
  for (const name of (await fs.readdir(SYS_BLOCK)).filter((entry) => /^loop\d+$/.test(entry))) {
    try {
      const file = (await fs.readFile(path.join(SYS_BLOCK, name, 'loop', 'backing_file'), 'utf8')).trim();
      attachments.push({ device: `/dev/${name}`, file });
    } catch (error) {
      // Not attached (no loop/ directory), or detached while we read (ENODEV, ENXIO: another holder's device
      // going away on a shared node): either way it backs nothing now.
      if (!isNotFound(error) && !DETACHING.has((error as NodeJS.ErrnoException).code ?? '')) throw error;
    }
  }
  return attachments;
}

/* The image files. */

/** Creates or grows the file to `bytes`, allocating every block; never shrinks. No space: ResourceExhausted. */
export async function preallocate(file: string, bytes: number): Promise<void> {
  try {
    await runTool('fallocate', ['--length', String(bytes), file]);
  } catch (error) {
    if (error instanceof ToolError && /No space left/i.test(error.stderr)) {
      throw new DriverError(FailureType.ResourceExhausted, `no space left for ${formatBytes(bytes)} at ${file}`);
    }
    throw error;
  }
  await fsyncPath(file);
  await fsyncDir(path.dirname(file));
}

/** ResourceExhausted when the filesystem holding `dir` has less than `bytes` free (for unprivileged users). */
export async function assertFreeSpace(dir: string, bytes: number, what: string): Promise<void> {
  const stats = await fs.statfs(dir);
  const free = stats.bavail * stats.bsize;
  if (bytes > free) {
    throw new DriverError(
      FailureType.ResourceExhausted,
      `${what} needs ${formatBytes(bytes)} and the filesystem holding ${dir} has ${formatBytes(free)} free`,
    );
  }
}
