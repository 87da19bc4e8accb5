/** Directories of <key>.json files (journal/, staging/): what can be read, and the strays, left alone. */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { isTempFileName } from '../host/files';
import { keyOfJsonFileName } from './pool-layout';

/** Entries `read` understands, in name order; every other name (temporary files aside) is a stray. */
export async function readKeyedFiles<T>(
  dir: string,
  read: (key: string) => Promise<T | undefined>,
): Promise<{ entries: T[]; strays: string[] }> {
  const entries: T[] = [];
  const strays: string[] = [];
  for (const name of (await fs.readdir(dir)).sort()) {
    if (isTempFileName(name)) continue;
    const key = keyOfJsonFileName(name);
    const entry = key === undefined ? undefined : await read(key);
    if (entry) entries.push(entry);
    else strays.push(path.join(dir, name));
  }
  return { entries, strays };
}
