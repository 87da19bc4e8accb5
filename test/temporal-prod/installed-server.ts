import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../common/project-root';

/** What scripts/install-temporal-server.js leaves under .tools/temporal-server/<version>/. */
export interface InstalledServer {
  version: string;
  server: string;
  sqlTool: string;
  /** schema/postgresql/v12 copied from the module: temporal/ and visibility/, each with versioned/. */
  schemaDir: string;
}

interface Pin {
  module: string;
  version: string;
}

/** The pinned server version, e.g. v1.32.0 (test/temporal-prod/server-version.json, shared with the install script). */
export function pinnedServerVersion(root = findProjectRoot()): string {
  const pin = JSON.parse(
    fs.readFileSync(path.join(root, 'test', 'temporal-prod', 'server-version.json'), 'utf8'),
  ) as Pin;
  return pin.version;
}

/** The installed binaries; a missing install is an error with the command that makes it, never a skip. */
export function installedServer(root = findProjectRoot()): InstalledServer {
  const version = pinnedServerVersion(root);
  const dir = path.join(root, '.tools', 'temporal-server', version);
  const installed: InstalledServer = {
    version,
    server: path.join(dir, 'bin', 'temporal-server'),
    sqlTool: path.join(dir, 'bin', 'temporal-sql-tool'),
    schemaDir: path.join(dir, 'schema', 'postgresql', 'v12'),
  };
  const missing = [installed.server, installed.sqlTool, installed.schemaDir].filter((file) => !fs.existsSync(file));
  if (missing.length > 0 || !fs.existsSync(path.join(dir, 'stamp.json'))) {
    throw new Error(
      `temporal-server ${version} is not installed (missing ${missing.join(', ') || path.join(dir, 'stamp.json')}).\n` +
        '  Run `node scripts/install-temporal-server.js` (npm test runs it; it needs Go and takes ~6 minutes cold).',
    );
  }
  return installed;
}
