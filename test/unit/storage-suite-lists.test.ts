import fs from 'node:fs';
import path from 'node:path';
import { countSpecs, driverYaml, type SuiteDriver } from '../e2e-node/storage-suite/run-suite';
import { ciSkip, focusFor } from '../e2e-node/storage-suite/scope';
import { SELF_SKIPS, SUITE_SKIPS, activeSkips, skipPattern, skipReason } from '../e2e-node/storage-suite/skips';

const DRIVERS: SuiteDriver[] = ['loop-ext4', 'loop-xfs', 'dir'];
const SPEC =
  'External Storage [Driver: durable-csi.io] [Testpattern: Dynamic PV (default fs)] volume-expand ' +
  'should resize volume when PVC is edited while pod is using it';

describe('the storage suite lists', () => {
  it('gives every skip a reason and a pattern Ginkgo can compile', () => {
    for (const skip of SUITE_SKIPS) {
      expect(skip.reason.length).toBeGreaterThan(40);
      expect(() => new RegExp(skip.spec)).not.toThrow();
    }
    for (const driver of DRIVERS) expect(() => new RegExp(skipPattern(driver))).not.toThrow();
    for (const skip of SELF_SKIPS) expect(skip.reason.length).toBeGreaterThan(40);
  });

  it('skips ext4 online growth only for ext4 and only on a host without CAP_SYS_RESOURCE', () => {
    const online = SUITE_SKIPS.find((skip) => new RegExp(skip.spec).test(SPEC));
    expect(online?.drivers).toEqual(['loop-ext4']);
    expect(activeSkips('loop-xfs')).not.toContain(online);
    const host = fs.readFileSync('/proc/self/status', 'utf8').match(/^CapBnd:\s*([0-9a-f]+)$/m)?.[1] ?? '0';
    const hasIt = (BigInt(`0x${host}`) & (1n << 24n)) !== 0n;
    expect(activeSkips('loop-ext4').includes(online!)).toBe(!hasIt);
  });

  it('explains a declared-false skip and refuses an unknown one', () => {
    expect(skipReason('', 'dir')).toMatch(/not selected/);
    expect(skipReason('Driver "durable-csi.io" does not support ROX access mode - skipping', 'dir')).toMatch(
      /declares false/,
    );
    // Snapshots and clones are declared: a spec skipping for their lack is a lost capability, and fails the run.
    for (const lost of ['cloning', 'volume clone', 'populating data from snapshot', 'volume snapshots'])
      expect(skipReason(`Driver "durable-csi.io" does not support ${lost} - skipping`, 'dir')).toBeUndefined();
    expect(skipReason("Driver durable-csi.io doesn't support RWX -- skipping", 'dir')).toMatch(/declares false/);
    // Since v1.37 a suite registers no block specs for a driver without block: such a skip would be new, and fails.
    const noBlock = 'Driver "durable-csi.io" does not support block volume mode - skipping';
    expect(skipReason(noBlock, 'dir')).toBeUndefined();
    expect(skipReason(noBlock, 'loop-ext4')).toBeUndefined();
    expect(skipReason('Driver "durable-csi.io" does not support something new', 'dir')).toBeUndefined();
  });

  it('runs everything for loop ext4 and the filesystem suites for the others', () => {
    expect(focusFor('loop-ext4')).toBe('External.Storage');
    const xfs = new RegExp(focusFor('loop-xfs'));
    expect(xfs.test(SPEC)).toBe(true);
    expect(xfs.test(SPEC.replace('volume-expand', 'multiVolume'))).toBe(false);
    // Group snapshots run in CI with ext4 (everything) only: for xfs they are the full run's.
    const group =
      'External Storage [Driver: durable-csi.io] [Testpattern: Pre-provisioned VolumeGroupSnapshot (retain policy)] ' +
      'volumegroupsnapshottable [Feature:volumegroupsnapshot] VolumeGroupSnapshottable should create snapshots';
    expect(xfs.test(group)).toBe(false);
    expect(new RegExp(focusFor('loop-ext4')).test(group)).toBe(true);
    // CI leaves out nothing for loop ext4, the pre-provisioned group patterns included, and [Slow] for the others.
    expect(ciSkip('loop-ext4')).toBeUndefined();
    for (const driver of ['loop-xfs', 'dir'] as const) expect(ciSkip(driver)).toBe('\\[Slow\\]');
  });

  it('has a driver YAML per class, naming a class deploy/ ships', () => {
    const classes = fs.readFileSync(path.join(__dirname, '..', '..', 'deploy', 'base', 'storageclasses.yaml'), 'utf8');
    for (const driver of DRIVERS) {
      const yaml = fs.readFileSync(driverYaml(driver), 'utf8');
      const name = /FromExistingClassName: (\S+)/.exec(yaml)?.[1];
      expect(classes).toContain(`name: ${name}`);
      // The snapshot patterns copy components/snapshots' VolumeSnapshotClass.
      const snapshotClass = /SnapshotClass:\n\s+FromExistingClassName: (\S+)/.exec(yaml)?.[1];
      expect(snapshotClass).toBe('durable-csi');
      expect(yaml).toMatch(/snapshotDataSource: true\n\s+pvcDataSource: true/);
    }
  });

  it("declares group snapshots where the suite's groups can be made, with the class deploy/ ships", () => {
    const shipped = fs.readFileSync(
      path.join(__dirname, '..', '..', 'deploy', 'components', 'snapshots', 'volumesnapshotclass.yaml'),
      'utf8',
    );
    expect(shipped).toMatch(/kind: VolumeGroupSnapshotClass\nmetadata:\n\s+name: durable-csi\n/);
    // loop: every member is a mounted filesystem, frozen for the copy. dir: a volume in use cannot be frozen alone,
    // and every group of the suite is of claims its Pods have mounted (docs/storage-suite.md).
    const declared: Record<SuiteDriver, boolean> = { 'loop-ext4': true, 'loop-xfs': true, dir: false };
    for (const driver of DRIVERS) {
      const yaml = fs.readFileSync(driverYaml(driver), 'utf8');
      expect(yaml).toContain(`groupSnapshot: ${declared[driver]}\n`);
      const groupClass = /GroupSnapshotClass:\n\s+FromExistingClassName: (\S+)/.exec(yaml)?.[1];
      expect(groupClass).toBe(declared[driver] ? 'durable-csi' : undefined);
    }
  });

  it("counts [It] specs only, and tells the suite's own skips from the unselected", () => {
    const spec = (name: string, status: 'passed' | 'failed' | 'skipped', message = '') => ({
      name,
      status,
      message,
      detail: '',
      seconds: 0,
    });
    const counts = countSpecs([
      spec('[It] a', 'passed'),
      spec('[It] b', 'failed'),
      spec('[It] c', 'skipped', 'does not support cloning'),
      spec('[It] d', 'skipped'),
      spec('[ReportAfterSuite] Kubernetes e2e JUnit report', 'passed'),
    ]);
    expect(counts).toEqual({ run: 2, passed: 1, failed: 1, skipped: 2, selfSkipped: 1 });
  });
});
