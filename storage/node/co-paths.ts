/**
 * The staging and target paths the CO hands us: made when missing (their parent is the CO's), and removed only
 * when they are what we would have made: an empty directory or an empty file. Nothing else outside the pool is
 * ever created or deleted.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import { errorCode, isNotFound } from '../host/files';

export function assertCoPath(target: string, field: string): void {
  if (typeof target !== 'string' || !path.isAbsolute(target) || target.includes('\0')) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `${field} must be an absolute path (got ${JSON.stringify(target)})`,
    );
  }
}

/** Makes the directory unless it exists; resolves true when it made it. A non-directory there: InvalidArgument. */
export async function ensureDirectory(target: string, field: string): Promise<boolean> {
  try {
    await fs.mkdir(target);
    return true;
  } catch (error) {
    if (errorCode(error) !== 'EEXIST') throw error;
  }
  if (!(await fs.stat(target)).isDirectory()) {
    throw new DriverError(FailureType.InvalidArgument, `${field} ${target} exists and is not a directory`);
  }
  return false;
}

/** A file to bind a block device onto; resolves true when it made it. A directory there: InvalidArgument. */
export async function ensureFile(target: string, field: string): Promise<boolean> {
  try {
    await (await fs.open(target, 'wx')).close();
    return true;
  } catch (error) {
    if (errorCode(error) !== 'EEXIST') throw error;
  }
  if ((await fs.stat(target)).isDirectory()) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `${field} ${target} is a directory; a block volume needs a file`,
    );
  }
  return false;
}

/** Removes an empty directory or an empty regular file; anything else (or nothing) is left as it is. */
export async function removeIfEmpty(target: string): Promise<void> {
  let stats;
  try {
    stats = await fs.lstat(target);
  } catch (error) {
    if (isNotFound(error)) return;
    throw error;
  }
  try {
    if (stats.isDirectory()) await fs.rmdir(target);
    else if (stats.isFile() && stats.size === 0) await fs.unlink(target);
  } catch (error) {
    // Not empty after all, or still a mount point: it is not ours to remove.
    if (!['ENOENT', 'ENOTEMPTY', 'EEXIST', 'EBUSY'].includes(errorCode(error) ?? '')) throw error;
  }
}
