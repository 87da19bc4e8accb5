import { promises as fs } from 'node:fs';
import path from 'node:path';

/**
 * Whether the kernel refuses writes to the block device (a `losetup --read-only` device, `blockdev --setro`):
 * /sys/class/block/<name>/ro, which follows the device node's real name.
 */
export async function isReadOnlyDevice(device: string): Promise<boolean> {
  const name = path.basename(await fs.realpath(device));
  return (await fs.readFile(path.join('/sys/class/block', name, 'ro'), 'utf8')).trim() === '1';
}
