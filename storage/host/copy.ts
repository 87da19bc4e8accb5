/**
 * Copies inside the pool, for snapshots, restores and clones: cp(1) through the process runner, with reflinks
 * where the filesystem has them (XFS with reflink, btrfs: the copy shares blocks and takes no time) and a plain
 * copy elsewhere. Both sides are paths the pool layout made; neither ever comes from the CO.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import { fsyncDir, fsyncPath } from './atomic-file';
import { FORMAT_TIMEOUT_MS, ToolError, runTool } from './tools';

/** A copy of a large volume is as slow as its disk; a mkfs-sized timeout, not a tool's. */
const COPY_TIMEOUT_MS = FORMAT_TIMEOUT_MS;

/**
 * Copies the content of directory `from` (dotfiles included) into the existing directory `to`, keeping modes,
 * owners, times, links and extended attributes (`cp -a`). Symbolic links are copied as links, never followed, so
 * nothing outside `from` is read. The filesystem is synced after: the caller writes its record next.
 */
export async function copyTree(from: string, to: string): Promise<void> {
  await copy(['-a', '--reflink=auto', '--', `${from}${path.sep}.`, to], to);
  await runTool('sync', ['-f', to]);
}

/** Copies an image file, holes kept as holes (`--sparse=always`), and fsyncs it. */
export async function copyImage(from: string, to: string): Promise<void> {
  await copy(['--reflink=auto', '--sparse=always', '--', from, to], to);
  await fsyncPath(to);
  await fsyncDir(path.dirname(to));
}

/**
 * A reflink of a whole image file in one FICLONE (`cp --reflink=always`), and fsynced: the filesystem shares the
 * source's extents under its inode locks, so no write lands half in the copy. False, with nothing left at `to`,
 * when the pool's filesystem has no reflinks.
 */
export async function cloneImage(from: string, to: string): Promise<boolean> {
  try {
    await copy(['--reflink=always', '--', from, to], to);
  } catch (error) {
    if (!(error instanceof ToolError && /failed to clone/i.test(error.stderr))) throw error;
    await fs.rm(to, { force: true });
    return false;
  }
  await fsyncPath(to);
  await fsyncDir(path.dirname(to));
  return true;
}

async function copy(args: string[], to: string): Promise<void> {
  try {
    await runTool('cp', args, { timeoutMs: COPY_TIMEOUT_MS });
  } catch (error) {
    if (error instanceof ToolError && /No space left/i.test(error.stderr)) {
      throw new DriverError(FailureType.ResourceExhausted, `no space left on the pool's filesystem to copy to ${to}`);
    }
    throw error;
  }
}
