import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findProjectRoot } from '../../temporal-dev/project-root';
import type { SoakReport } from './report';

/**
 * The short soak (docs/soak.md): every fault kind once, a few hundred operations, then the leak audit. It runs the
 * compiled harness as its own process (it starts its own Temporal server), so a failure prints the whole report.
 * DURABLE_CSI_SOAK_SEED replays a given seed; DURABLE_CSI_SOAK_ARGS adds options.
 */
const root = findProjectRoot();
const TIMEOUT_MS = 15 * 60_000;

describe('soak (short run)', () => {
  it(
    'loses, leaks and duplicates nothing through rollouts, crashes, a Temporal restart and a version-skew upgrade',
    () => {
      const reportFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'soak-report-')), 'soak-report.json');
      const seed = process.env.DURABLE_CSI_SOAK_SEED ?? String(Math.floor(Math.random() * 2 ** 31));
      const extra = (process.env.DURABLE_CSI_SOAK_ARGS ?? '').split(' ').filter(Boolean);
      const args = [path.join(root, 'dist', 'test', 'soak', 'main.js'), '--ops', '200', '--seed', seed];
      args.push('--long-down', '35s', '--report', reportFile, ...extra);
      const result = spawnSync(process.execPath, args, {
        cwd: root,
        encoding: 'utf8',
        timeout: TIMEOUT_MS - 30_000,
        maxBuffer: 64 * 1024 * 1024,
      });
      const output = `${result.stdout}\n${result.stderr.split('\n').slice(-40).join('\n')}`;
      // Kept where CI collects artifacts, whatever the outcome.
      const artifacts = path.join(root, 'test-artifacts');
      fs.mkdirSync(artifacts, { recursive: true });
      if (fs.existsSync(reportFile)) fs.copyFileSync(reportFile, path.join(artifacts, 'soak-short-report.json'));
      const report = fs.existsSync(reportFile)
        ? (JSON.parse(fs.readFileSync(reportFile, 'utf8')) as SoakReport)
        : undefined;
      if (result.status !== 0) {
        // The problems come first: CI logs may keep only the head and tail of a long message.
        const problems = report
          ? report.problems.map((problem) => `  - ${problem}`).join('\n')
          : '  (no report written)';
        const auditAt = result.stdout.indexOf('  audit:');
        const findings = auditAt >= 0 ? result.stdout.slice(auditAt, auditAt + 4000) : '';
        throw new Error(
          `the soak exited with ${result.status ?? result.signal}; problems:\n${problems}\n${findings}\n\n${output}`,
        );
      }
      if (!report) throw new Error(`the soak wrote no report at ${reportFile}:\n${output}`);
      expect(report.problems).toEqual([]);
      expect(report.audit).toMatchObject({ leaked: [], lost: [], duplicated: [], torn: [], pending: [] });
      expect(new Set(report.faults.map((fault) => fault.kind))).toEqual(new Set(report.options.faults));
      expect(report.faults.every((fault) => fault.hit.total > 0)).toBe(true);
    },
    TIMEOUT_MS,
  );
});
