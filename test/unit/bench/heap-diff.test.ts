import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { diffSummaries, summarizeSnapshot } from '../../bench/heap-diff';
import { slope } from '../../bench/stats';

/** A heap snapshot of a small process holding `count` instances of a class of its own. */
function snapshotHolding(dir: string, count: number): string {
  const file = path.join(dir, `held-${count}.heapsnapshot`);
  const script =
    'class HeldByTheTest { constructor(i) { this.i = i; } }' +
    `globalThis.held = Array.from({ length: ${count} }, (_, i) => new HeldByTheTest(i));` +
    `require('v8').writeHeapSnapshot(${JSON.stringify(file)});`;
  execFileSync(process.execPath, ['-e', script]);
  return file;
}

describe('the memory benchmark', () => {
  it('names what grew between two heap snapshots, by constructor', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-heap-diff-'));
    try {
      const before = summarizeSnapshot(snapshotHolding(dir, 10));
      const after = summarizeSnapshot(snapshotHolding(dir, 5_010));
      expect(before.get('HeldByTheTest')?.count).toBe(10);
      const grown = diffSummaries(before, after).find((growth) => growth.group === 'HeldByTheTest');
      expect(grown?.count).toBe(5_000);
      expect(grown?.size).toBeGreaterThan(5_000 * 8);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gives the growth per 1,000 lifecycles as the slope through the samples', () => {
    expect(slope([0, 1, 2, 3], [100, 103, 105, 109])).toBeCloseTo(2.9, 5);
    expect(slope([0], [100])).toBeNaN();
  });
});
