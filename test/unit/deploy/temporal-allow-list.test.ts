/**
 * issue 36 item 7: docs/security.md's table of what each identity calls is what a server-side authorizer's
 * allow-list is written from, so a call missing there is a controller refused at start (the controller called
 * OperatorService.ListSearchAttributes, which the table left out). Every Temporal API the code calls by name
 * (`<x>.workflowService.<method>(`, `<x>.operatorService.<method>(`) must be in the table; the calls the SDK makes
 * for client.workflow.* and the workers are listed there by hand.
 */
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../../common/project-root';

const ROOT = findProjectRoot();
/** The driver's own code: what runs in the controller, the node agents and the operator's CLI. */
const SOURCES = [
  'activities',
  'agent',
  'cli',
  'common',
  'csi',
  'kubernetes',
  'metrics',
  'node-records',
  'operations',
  'storage',
  'temporal',
  'workflows',
];

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'generated' ? [] : sourceFiles(file);
    return entry.name.endsWith('.ts') ? [file] : [];
  });
}

it('every Temporal API the code calls by name is in the identities table of docs/security.md', () => {
  const called = new Map<string, string>();
  for (const file of SOURCES.flatMap((dir) => sourceFiles(path.join(ROOT, dir))))
    for (const [, service, method] of fs
      .readFileSync(file, 'utf8')
      .matchAll(/\.(workflowService|operatorService)\.(\w+)\(/g)) {
      const api = `${service === 'operatorService' ? 'OperatorService.' : ''}${method![0]!.toUpperCase()}${method!.slice(1)}`;
      called.set(api, path.relative(ROOT, file));
    }
  expect(called.size).toBeGreaterThan(0);
  const security = fs.readFileSync(path.join(ROOT, 'docs/security.md'), 'utf8');
  const section = security.slice(security.indexOf('## Temporal identities'));
  const table = section
    .split('\n')
    .filter((line) => line.startsWith('| '))
    .join('\n');
  const missing = [...called].filter(([api]) => !table.includes(api)).map(([api, file]) => `${api} (${file})`);
  expect(missing).toEqual([]);
});
