import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findProjectRoot } from '../../common/project-root';
import type { SoakReport } from './report';

/**
 * Runs the compiled soak as its own process (it starts its own Temporal server) for a jest test, copies its report
 * to test-artifacts/<artifact> whatever the outcome, and fails with the problems first when it fails.
 * DURABLE_CSI_SOAK_SEED replays a given seed; DURABLE_CSI_SOAK_ARGS adds options.
 */
export function runSoakForTest(args: string[], artifact: string, timeoutMs: number): SoakReport {
  const root = findProjectRoot();
  const reportFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'soak-report-')), 'soak-report.json');
  const seed = process.env.DURABLE_CSI_SOAK_SEED ?? String(Math.floor(Math.random() * 2 ** 31));
  const extra = (process.env.DURABLE_CSI_SOAK_ARGS ?? '').split(' ').filter(Boolean);
  const command = [path.join(root, 'dist', 'test', 'soak', 'main.js'), ...args, '--seed', seed];
  command.push('--report', reportFile, ...extra);
  const result = spawnSync(process.execPath, command, {
    cwd: root,
    encoding: 'utf8',
    timeout: timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
  });
  const output = `${result.stdout}\n${result.stderr.split('\n').slice(-40).join('\n')}`;
  // Kept where CI collects artifacts, whatever the outcome.
  const artifacts = path.join(root, 'test-artifacts');
  fs.mkdirSync(artifacts, { recursive: true });
  if (fs.existsSync(reportFile)) fs.copyFileSync(reportFile, path.join(artifacts, artifact));
  const report = fs.existsSync(reportFile)
    ? (JSON.parse(fs.readFileSync(reportFile, 'utf8')) as SoakReport)
    : undefined;
  if (result.status !== 0) {
    // The problems come first: CI logs may keep only the head and tail of a long message.
    const problems = report ? report.problems.map((problem) => `  - ${problem}`).join('\n') : '  (no report written)';
    const auditAt = result.stdout.indexOf('  audit:');
    const findings = auditAt >= 0 ? result.stdout.slice(auditAt, auditAt + 4000) : '';
    throw new Error(
      `the soak exited with ${result.status ?? result.signal}; problems:\n${problems}\n${findings}\n\n${output}`,
    );
  }
  if (!report) throw new Error(`the soak wrote no report at ${reportFile}:\n${output}`);
  return report;
}
