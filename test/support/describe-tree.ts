import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * A directory tree as lines to compare: each entry (sorted, relative) with its mode, owner, link count and content
 * (a file's sha256, a link's target): two trees that describe alike hold the same data with the same metadata.
 */
export function describeTree(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true })
    .map(String)
    .sort()
    .map((entry) => {
      const full = path.join(dir, entry);
      const stat = fs.lstatSync(full);
      const content = stat.isSymbolicLink()
        ? `-> ${fs.readlinkSync(full)}`
        : stat.isFile()
          ? createHash('sha256').update(fs.readFileSync(full)).digest('hex')
          : 'dir';
      return `${entry} ${stat.mode.toString(8)} ${stat.uid}:${stat.gid} ${stat.nlink} ${content}`;
    });
}
