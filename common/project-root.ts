import * as fs from 'fs';
import * as path from 'path';

const PACKAGE_NAME = 'durable-csi';

/**
 * The repository root. Walks up from this file because it runs both from source (ts-jest)
 * and compiled (dist/common/), which sit at different depths.
 */
export function findProjectRoot(start: string = __dirname): string {
  for (let dir = path.resolve(start); ; dir = path.dirname(dir)) {
    if (readPackageName(path.join(dir, 'package.json')) === PACKAGE_NAME) return dir;
    if (path.dirname(dir) === dir) throw new Error(`No package.json named "${PACKAGE_NAME}" above ${start}`);
  }
}

function readPackageName(file: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(fs.readFileSync(file, 'utf8'));
    return typeof parsed === 'object' && parsed !== null && 'name' in parsed && typeof parsed.name === 'string'
      ? parsed.name
      : undefined;
  } catch {
    return undefined;
  }
}
