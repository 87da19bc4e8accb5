/**
 * The docs name files by path; a file moved or merged leaves its old name behind, and a newcomer following the doc
 * finds nothing (issue 34 found 64 such names after the storage and workflow restructuring). Every backticked file
 * path in the docs must name a file of this repository: a path with a slash from the repository root, a bare file
 * name anywhere in it. Only the names below, which are not files of this repository, are let through.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../../common/project-root';

const ROOT = findProjectRoot();

/**
 * Names the docs use that are no file of this repository, each with the reason; a name ending in / lets through
 * everything under it. Generated files are checked against `git ls-files`, not the disk, so a fresh clone passes too.
 */
const NOT_OURS: Record<string, string> = {
  'dist/': 'the build output (.gitignore): dist/build-info.json is written by npm run build (docs/releases.md)',
  '.tools/': "what scripts/setup.js installs (.gitignore): csi-sanity's stamp file",
  'test-artifacts/': 'what test runs and benchmarks write (.gitignore): their reports and summaries',
  'pool.json': "a file in a node's pool directory (storage/pool/pool-layout.ts), not in the repository",
  'summary.json': "a file csi-sanity's runner writes under test-artifacts/csi-sanity/<configuration>/",
  'stamp.json': "the Kubernetes binaries' build stamp, written beside the binaries under .tools/",
  '@temporalio/worker/lib/worker.js': 'a file of the Temporal SDK package in node_modules',
  'config/development-postgres12.yaml': "a file of Temporal's server repository, which the prod harness follows",
};

function notOurs(name: string): boolean {
  return Object.keys(NOT_OURS).some((allowed) => (allowed.endsWith('/') ? name.startsWith(allowed) : name === allowed));
}

const DOC_FILES = (): string[] =>
  [
    ...trackedFiles().filter((file) => /^docs\/[^/]+\.md$/.test(file)),
    'README.md',
    'deploy/README.md',
    'CHANGELOG.md',
  ].sort();

let tracked: string[] | undefined;
function trackedFiles(): string[] {
  tracked ??= execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
  return tracked;
}

const FILE_PATH = /^[\w@.-]+(\/[\w@.-]+)*\.(ts|js|mjs|json|yaml|md)$/;

/** Every backticked span of a document that is a file path, outside fenced code blocks. */
export function backtickedPaths(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '');
  return [...prose.matchAll(/`([^`\n]+)`/g)].map((match) => match[1] ?? '').filter((span) => FILE_PATH.test(span));
}

function exists(name: string): boolean {
  if (name.includes('/')) return trackedFiles().includes(name.replace(/^\.\//, ''));
  return trackedFiles().some((file) => path.basename(file) === name);
}

describe('file paths in the docs', () => {
  it('finds the paths it must check', () => {
    expect(backtickedPaths('see `common/names.ts` and `pool.json`, not `--flag` or `<pool>/x.json`')).toEqual([
      'common/names.ts',
      'pool.json',
    ]);
  });

  it('name files of this repository', () => {
    const stale: string[] = [];
    for (const doc of DOC_FILES()) {
      for (const name of new Set(backtickedPaths(readFileSync(path.join(ROOT, doc), 'utf8')))) {
        if (!notOurs(name) && !exists(name)) stale.push(`${doc}: ${name}`);
      }
    }
    expect(stale).toEqual([]);
  });

  it("give docs/layout.md's file counts as git ls-files has them", () => {
    const layout = readFileSync(path.join(ROOT, 'docs/layout.md'), 'utf8');
    const rooms = layout.slice(layout.indexOf('## The rooms of storage/'));
    const counted = [...layout.matchAll(/^\|[^|\n]*\|([^|\n]*)\|\s*([\d, ]+?)\s*\|/gm)].flatMap((row) => {
      const folders = [...(row[1] ?? '').matchAll(/`([\w-]+)\/`/g)].map((folder) => folder[1] ?? '');
      const counts = (row[2] ?? '').split(',').map(Number);
      return folders.map((folder, index) => ({ folder, count: counts[index] }));
    });
    const roomRows = [...rooms.matchAll(/^\|([^|\n]*)\|\s*([\d, ]+?)\s*\|/gm)].flatMap((row) => {
      const folders = [...(row[1] ?? '').matchAll(/`([\w-]+)\/`/g)].map((folder) => `storage/${folder[1] ?? ''}`);
      const counts = (row[2] ?? '').split(',').map(Number);
      return folders.map((folder, index) => ({ folder, count: counts[index] }));
    });
    const rows = [...counted, ...roomRows];
    expect(rows.length).toBeGreaterThanOrEqual(16);
    const actual = rows.map(({ folder }) => ({
      folder,
      count: trackedFiles().filter((file) => file.startsWith(`${folder}/`)).length,
    }));
    expect(rows).toEqual(actual);
  });

  it('lets through only names that are really not files of this repository', () => {
    const tracked = trackedFiles();
    const ours = Object.keys(NOT_OURS).filter((allowed) =>
      allowed.endsWith('/') ? tracked.some((file) => file.startsWith(allowed)) : exists(allowed),
    );
    expect(ours).toEqual([]);
  });
});
