import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from './project-root';

/**
 * What this build is (scripts/build-info.js wrote dist/build-info.json): the bare version only for a release build,
 * `<next>-dev.<commit>` otherwise. Without the file (a build by hand, never through npm run build or setup), the
 * package version marked as of an unknown commit, so it is never taken for a release.
 */
export function driverVersion(): string {
  const root = findProjectRoot();
  try {
    const info = JSON.parse(fs.readFileSync(path.join(root, 'dist', 'build-info.json'), 'utf8')) as {
      version?: unknown;
    };
    if (typeof info.version === 'string') return info.version;
  } catch {
    // no build info: below
  }
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version?: string };
  return `${pkg.version ?? '0.0.0'}-dev.unknown`;
}
