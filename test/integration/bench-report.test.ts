import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { findProjectRoot } from '../../common/project-root';
import type { BenchReport } from '../bench/report';

/**
 * `npm run bench` at a tiny size, as a real process on the real dev server: its report must carry every process
 * role of issue 23 (controller, node agents, supervisor, Temporal server) with CPU per create+delete and RSS, and
 * the lifecycle samples, so that a change that drops one shows here rather than in the next person's sizing.
 */
test('the benchmark reports CPU and RSS for every process role, the lifecycles and the supervisor', async () => {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-bench-report-')), 'bench.json');
  const bench = path.join(findProjectRoot(), 'dist', 'test', 'bench', 'bench.js');
  const args = ['--ops', '6', '--concurrency', '3', '--drain', '0', '--warmup', '1', '--idle-settle', '500'];
  args.push('--lifecycles', '6', '--lifecycle-batch', '3', '--supervisor-ops', '4', '--out', out);
  const { stdout } = await promisify(execFile)(process.execPath, [bench, ...args], { maxBuffer: 1 << 24 });
  const report = JSON.parse(fs.readFileSync(out, 'utf8')) as BenchReport;
  expect(report.problems).toEqual([]);
  const cost = report.durable[0]?.cost;
  for (const role of ['controller', 'node agents', 'temporal']) {
    expect(cost?.create.usage.cpuMs[role]).toBeGreaterThan(0);
    expect(cost?.delete.usage.peakRssMb[role]).toBeGreaterThan(10);
    expect(report.idle?.start.resident[role]?.rss).toBeGreaterThan(10);
  }
  expect(report.lifecycles?.samples.map((sample) => sample.lifecycles)).toEqual([3, 6]);
  expect(report.lifecycles?.samples[1]?.resident.controller?.rss).toBeGreaterThan(10);
  expect(Object.keys(report.lifecycles?.growthMb ?? {})).toEqual(expect.arrayContaining(['controller', 'node agents']));
  expect(report.supervisor?.idle.resident?.rss).toBeGreaterThan(10);
  expect(report.supervisor?.cpuMsPerPair).toBeGreaterThanOrEqual(0);
  expect(stdout).toContain('The dev supervisor (`durable-csi dev --nodes 3`');
  expect(stdout).toContain('dev supervisor RSS at idle');
  fs.rmSync(path.dirname(out), { recursive: true, force: true });
}, 300_000);
