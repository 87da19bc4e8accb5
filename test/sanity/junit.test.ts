import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { allowedSkip, ALLOWED_SKIPS } from './allowed-skips';
import { SANITY_CONFIGS, selectedConfigs } from './configs';
import { leftInPool } from './leaks';
import { parseGinkgoSummary, parseJunit } from '../support/ginkgo-junit';

// Shaped like Ginkgo v2's report from csi-sanity v5.6.0 (system-err trimmed).
const REPORT = `<?xml version="1.0" encoding="UTF-8"?>
  <testsuites tests="4" disabled="1" errors="0" failures="1" time="1.5">
      <testsuite name="CSI Driver Test Suite" tests="4" disabled="1" skipped="1" errors="0" failures="1" time="1.5">
          <properties><property name="RandomSeed" value="42"></property></properties>
          <testcase name="[It] Identity Service Probe should return appropriate information" classname="CSI Driver Test Suite" status="passed" time="0.01">
              <system-err>&gt; Enter [BeforeEach]</system-err>
          </testcase>
          <testcase name="[It] CreateSnapshot [Controller Server] should fail when no name is provided" classname="CSI Driver Test Suite" status="skipped" time="0.02">
              <skipped message="skipped - CreateSnapshot not supported"></skipped>
          </testcase>
          <testcase name="[It] Node Service NodeGetVolumeStats should fail when volume is not found" classname="CSI Driver Test Suite" status="failed" time="0.5">
              <failure message="unexpected error: volume_path must be an absolute path&#xA;Expected&#xA;    &lt;codes.Code&gt;: 3" type="failed">[FAILED] unexpected error&#xA;In [It] at: node.go:1</failure>
          </testcase>
          <testcase name="[It] ListVolumes &quot;pagination&quot; &amp; more" classname="CSI Driver Test Suite" status="pending" time="0">
              <skipped message="pending"></skipped>
          </testcase>
      </testsuite>
  </testsuites>`;

describe('the csi-sanity report reader', () => {
  it('reads every spec with its status and message', () => {
    const specs = parseJunit(REPORT);
    expect(specs.map((spec) => [spec.status, spec.message])).toEqual([
      ['passed', ''],
      ['skipped', 'CreateSnapshot not supported'],
      ['failed', 'unexpected error: volume_path must be an absolute path\nExpected\n    <codes.Code>: 3'],
      ['pending', 'pending'],
    ]);
    expect(specs[2]?.detail).toBe('[FAILED] unexpected error\nIn [It] at: node.go:1');
    expect(specs[3]?.name).toBe('[It] ListVolumes "pagination" & more');
  });

  it("reads Ginkgo's closing summary, coloured or not", () => {
    const output =
      'Ran 3 of 4 Specs in 1.5 seconds\n\x1b[1mFAIL!\x1b[0m -- 1 Passed | 1 Failed | 1 Pending | 1 Skipped\n';
    expect(parseGinkgoSummary(output)).toEqual({ ran: 3, total: 4, passed: 1, failed: 1, pending: 1, skipped: 1 });
    expect(parseGinkgoSummary('panic: no summary')).toBeUndefined();
  });
});

describe('the csi-sanity configurations', () => {
  it('runs all three by default and refuses unknown names', () => {
    expect(selectedConfigs(undefined).map((config) => config.name)).toEqual(['dir', 'loop-mount', 'loop-block']);
    expect(selectedConfigs('all')).toEqual(selectedConfigs(''));
    expect(selectedConfigs(' dir , loop-block').map((config) => config.name)).toEqual(['dir', 'loop-block']);
    expect(() => selectedConfigs('dir,loop')).toThrow(/known configurations: dir, loop-mount, loop-block/);
  });

  it('gives every allowed skip a reason and only known configurations', () => {
    const names = new Set<string>(SANITY_CONFIGS.map((config) => config.name));
    for (const entry of ALLOWED_SKIPS) {
      expect(entry.reason.length).toBeGreaterThan(20);
      if (entry.configs !== 'all') for (const name of entry.configs) expect(names.has(name)).toBe(true);
    }
    expect(new Set(ALLOWED_SKIPS.map((entry) => entry.message)).size).toBe(ALLOWED_SKIPS.length);
  });

  it('runs the snapshot and cloning specs in every configuration: their skips are never allowed', () => {
    expect(SANITY_CONFIGS.filter((config) => !config.snapshots)).toEqual([]);
    const specSkips = [
      'Snapshot not supported',
      'CreateSnapshot not supported',
      'DeleteSnapshot not supported',
      'ListSnapshots not supported',
      'GetSnapshot not supported',
      'Volume Cloning not supported',
    ];
    for (const config of SANITY_CONFIGS) {
      for (const message of specSkips)
        expect([config.name, allowedSkip(config.name, message)]).toEqual([config.name, undefined]);
    }
  });
});

describe('the csi-sanity pool check', () => {
  it('names every volume, snapshot, record, intent and staging record left in the pool', () => {
    const pool = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-sanity-pool-'));
    try {
      fs.writeFileSync(path.join(pool, 'pool.json'), '{}');
      for (const dir of ['volumes', 'records', 'journal', 'staging', 'snapshots/data', 'snapshots/records']) {
        fs.mkdirSync(path.join(pool, dir), { recursive: true });
      }
      expect(leftInPool(pool)).toEqual([]);
      fs.mkdirSync(path.join(pool, 'snapshots', 'data', 'a1'));
      fs.writeFileSync(path.join(pool, 'snapshots', 'records', 'a1.json'), '{}');
      fs.mkdirSync(path.join(pool, 'snapshots', 'journal'));
      fs.writeFileSync(path.join(pool, 'snapshots', 'journal', 'a2.json'), '{}');
      fs.mkdirSync(path.join(pool, 'volumes', 'b1'));
      fs.writeFileSync(path.join(pool, 'staging', 'b1.json'), '{}');
      expect(leftInPool(pool)).toEqual([
        path.join('snapshots', 'data', 'a1'),
        path.join('snapshots', 'journal', 'a2.json'),
        path.join('snapshots', 'records', 'a1.json'),
        path.join('staging', 'b1.json'),
        path.join('volumes', 'b1'),
      ]);
    } finally {
      fs.rmSync(pool, { recursive: true, force: true });
    }
  });
});
