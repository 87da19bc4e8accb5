import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from './project-root';

/** The package version, read from package.json whether running from source or from dist/. */
export function driverVersion(): string {
  const pkg = JSON.parse(fs.readFileSync(path.join(findProjectRoot(), 'package.json'), 'utf8')) as { version?: string };
  return pkg.version ?? '0.0.0';
}
