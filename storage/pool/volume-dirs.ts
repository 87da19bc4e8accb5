/** The data directories under volumes/, one per key. */
import { promises as fs } from 'node:fs';
import { fsyncDir, pathExists } from '../host/files';
import type { PoolLayout } from './pool-layout';

/** Fails with EEXIST rather than adopt a directory this call did not create. */
export async function makeVolumeDir(layout: PoolLayout, key: string): Promise<void> {
  await fs.mkdir(layout.volumeDir(key));
  await fsyncDir(layout.volumesDir);
}

/** Removes the volume's directory and only that: fs.rm does not follow symbolic links inside it. */
export async function removeVolumeDir(layout: PoolLayout, key: string): Promise<void> {
  await fs.rm(layout.volumeDir(key), { recursive: true, force: true });
  await fsyncDir(layout.volumesDir);
}

/** True for anything at the volume's path, directory or not. */
export async function volumeDirExists(layout: PoolLayout, key: string): Promise<boolean> {
  return pathExists(layout.volumeDir(key));
}
