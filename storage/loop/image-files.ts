/**
 * Image files of the loop backend: real capacity, not a sparse promise. fallocate(1) reserves the blocks, so a
 * full pool filesystem refuses a create at once instead of failing writes inside the volume later.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import { fsyncDir, fsyncPath } from '../host/files';
import { ToolError, runTool } from '../host/tools';

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
