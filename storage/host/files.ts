/**
 * Files on the host, for every room of storage/: what a failed call's errno is, whether a path exists, and
 * crash-safe writes. A crash-safe write is seen whole or not at all, never torn: content goes to a temporary file
 * in the same directory (so the rename stays on one filesystem) and is fsynced, the temporary file is renamed or
 * linked into place, and the directory is fsynced so the new name survives a power cut.
 */
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';

/** The errno code of a Node filesystem error ("ENOENT", ...), or undefined for anything else. */
export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}

export function isNotFound(error: unknown): boolean {
  return errorCode(error) === 'ENOENT';
}

/** True for anything at the path (a dangling symbolic link included). */
export async function pathExists(target: string): Promise<boolean> {
  try {
    await fs.lstat(target);
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}

const TEMP_NAME = /^\..+\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$/;

/** True for the names of temporary files this module creates (left behind only by a crash). */
export function isTempFileName(name: string): boolean {
  return TEMP_NAME.test(name);
}

/** fsync(2) of a file or a directory (a read-only descriptor is enough on Linux). */
export async function fsyncPath(target: string): Promise<void> {
  const handle = await fs.open(target, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export async function fsyncDir(dir: string): Promise<void> {
  await fsyncPath(dir);
}

/** `mode` (before the umask) is the file's from its creation: a secret is never readable by others, even briefly. */
async function writeTempFile(file: string, text: string, mode = 0o666): Promise<string> {
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.${randomUUID()}.tmp`);
  try {
    const handle = await fs.open(temp, 'wx', mode);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (error) {
    await fs.rm(temp, { force: true });
    throw error;
  }
  return temp;
}

export async function writeFileAtomic(file: string, text: string, mode?: number): Promise<void> {
  const temp = await writeTempFile(file, text, mode);
  try {
    await fs.rename(temp, file);
  } catch (error) {
    await fs.rm(temp, { force: true });
    throw error;
  }
  await fsyncDir(path.dirname(file));
}

/**
 * Creates `file` unless the name is taken; resolves false when it was. O_EXCL semantics without O_EXCL's
 * window where the file exists but is still empty: link(2) publishes the complete file or fails with EEXIST.
 */
export async function writeFileOnce(file: string, text: string, mode?: number): Promise<boolean> {
  const temp = await writeTempFile(file, text, mode);
  try {
    await fs.link(temp, file);
  } catch (error) {
    if (errorCode(error) === 'EEXIST') return false;
    throw error;
  } finally {
    await fs.rm(temp, { force: true });
  }
  await fsyncDir(path.dirname(file));
  return true;
}

/** Undefined when the file does not exist. */
export async function readFileIfExists(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/** Undefined when the file does not exist; callers validate the shape of what they get. */
export async function readJson(file: string): Promise<unknown> {
  const text = await readFileIfExists(file);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new DriverError(FailureType.Internal, `${file} is not valid JSON`);
  }
}

/** A JSON value's fields, for the caller to check one by one; anything but an object has none (every check fails). */
export function jsonFields(value: unknown): Partial<Record<string, unknown>> {
  return (typeof value === 'object' && value !== null ? value : {}) as Partial<Record<string, unknown>>;
}

export async function writeJsonAtomic(file: string, value: unknown, mode?: number): Promise<void> {
  await writeFileAtomic(file, `${JSON.stringify(value, null, 2)}\n`, mode);
}

export async function writeJsonOnce(file: string, value: unknown): Promise<boolean> {
  return writeFileOnce(file, `${JSON.stringify(value, null, 2)}\n`);
}

/** Resolves false when there was nothing to remove. */
export async function removeFile(file: string): Promise<boolean> {
  try {
    await fs.unlink(file);
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
  await fsyncDir(path.dirname(file));
  return true;
}

/** Makes the directory, and fsyncs its parent; EEXIST rather than adopt a directory this call did not make. */
export async function createDir(dir: string): Promise<void> {
  await fs.mkdir(dir);
  await fsyncDir(path.dirname(dir));
}

/**
 * Removes the directory and everything in it, and only that (fs.rm follows no symbolic link inside it), then fsyncs
 * its parent. Absent: nothing to do.
 */
export async function removeTree(dir: string): Promise<void> {
  await fs.rm(dir, { recursive: true, force: true });
  await fsyncDir(path.dirname(dir));
}
