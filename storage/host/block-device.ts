import { promises as fs } from 'node:fs';
import path from 'node:path';

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
