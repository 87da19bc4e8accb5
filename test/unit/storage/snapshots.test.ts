/**
 * Snapshots, restores and clones on real files: the dir backend against a temporary pool, the loop backend against
 * real images, loop devices and mounts (the tests run as root).
 */
import fs from 'node:fs';
import path from 'node:path';
import { FailureType } from '../../../common/failures';
import { DirBackend } from '../../../storage/dir/dir-backend';
import type { StoredRecord } from '../../../storage/pool/records';
import { LoopBackend } from '../../../storage/loop/loop-backend';
import type { CreateVolumeSpec } from '../../../storage/pool/backend';
import { PoolLayout } from '../../../storage/pool/pool-layout';
import { writeSnapshot } from '../../../storage/pool/snapshots';
import { writeSnapshotIntent, type SnapshotIntent } from '../../../storage/pool/journal';
import { expectDriverError } from '../../support/driver-error';
import { GI, PoolFixture, randomKey } from './pool-fixture';
import { execFileSync, spawnSync } from 'node:child_process';
import { majorMinorOf } from '../../../storage/host/mounts';
import { currentBootId, writeFreeze, writeIntent } from '../../../storage/pool/journal';
import { isFrozen, isMountPoint, loopDevicesOf, mountPoolFilesystem } from './mount-helpers';

const MiB = 1024 ** 2;

function volume(overrides: Partial<CreateVolumeSpec> = {}): CreateVolumeSpec {
  return { key: randomKey(), name: `pvc-${randomKey().slice(0, 8)}`, capacityBytes: GI, parameters: {}, ...overrides };
}

function snapshotIntent(op: SnapshotIntent['op'], key: string, sourceKey: string): SnapshotIntent {
  return { op, key, name: `snap-${key.slice(0, 6)}`, sourceKey, sizeBytes: GI, at: new Date().toISOString() };
}

describe('dir snapshots', () => {
  let fixture: PoolFixture;
  let layout: PoolLayout;

  beforeEach(() => {
    fixture = new PoolFixture();
    layout = new PoolLayout(fixture.pool);
  });

  afterEach(async () => {
    await fixture.cleanup();
  });

  /** A volume with a file, a dotfile, a subdirectory and a symbolic link to a file outside the pool. */
  async function filledVolume(backend: DirBackend, overrides: Partial<CreateVolumeSpec> = {}) {
    const record = await backend.createVolume(volume(overrides));
    fs.writeFileSync(path.join(record.path, 'data'), 'one');
    fs.writeFileSync(path.join(record.path, '.hidden'), 'dot');
    fs.mkdirSync(path.join(record.path, 'sub'));
    fs.writeFileSync(path.join(record.path, 'sub', 'deep'), 'deep');
    fs.chmodSync(path.join(record.path, 'sub', 'deep'), 0o640);
    const outside = path.join(fixture.root, 'outside');
    fs.writeFileSync(outside, 'not the pool');
    fs.symlinkSync(outside, path.join(record.path, 'link'));
    return record;
  }

  function contentOf(dir: string): Record<string, string> {
    const content: Record<string, string> = {};
    for (const entry of fs.readdirSync(dir, { recursive: true }).map(String).sort()) {
      const full = path.join(dir, entry);
      const stat = fs.lstatSync(full);
      content[entry] = stat.isSymbolicLink()
        ? `-> ${fs.readlinkSync(full)}`
        : stat.isDirectory()
          ? `dir ${(stat.mode & 0o777).toString(8)}`
          : `${fs.readFileSync(full, 'utf8')} ${(stat.mode & 0o777).toString(8)}`;
    }
    return content;
  }

  it('copies the volume into snapshots/, records it, reserves its size and leaves the journal empty', async () => {
    const backend = await fixture.opened();
    const source = await filledVolume(backend);
    const key = randomKey();

    const snapshot = await backend.createSnapshot({ snapshotKey: key, sourceKey: source.key, name: 'snap-1' });

    expect(snapshot).toEqual({
      key,
      name: 'snap-1',
      sourceKey: source.key,
      sizeBytes: GI,
      createdAt: expect.any(String),
      path: layout.snapshotDir(key),
    });
    expect(contentOf(snapshot.path)).toEqual(contentOf(source.path));
    expect(contentOf(snapshot.path).link).toBe(`-> ${path.join(fixture.root, 'outside')}`);
    expect(fixture.list('snapshots/journal')).toEqual([]);
    expect(fixture.list('snapshots/records')).toEqual([`${key}.json`]);
    expect(await backend.status()).toMatchObject({ reservedBytes: 2 * GI, volumeCount: 1, snapshotCount: 1 });
    expect(await backend.listSnapshots()).toEqual([snapshot]);
    expect(await backend.getSnapshot(key)).toEqual(snapshot);
    expect(await backend.getSnapshot(randomKey())).toBeUndefined();
  });

  it('is idempotent by key and source; another source or a taken name is AlreadyExists, creating nothing', async () => {
    const backend = await fixture.opened();
    const source = await filledVolume(backend);
    const other = await backend.createVolume(volume({ name: 'other' }));
    const key = randomKey();
    const first = await backend.createSnapshot({ snapshotKey: key, sourceKey: source.key, name: 'snap-1' });
    const before = fixture.tree();

    expect(await backend.createSnapshot({ snapshotKey: key, sourceKey: source.key, name: 'snap-1' })).toEqual(first);
    await expectDriverError(
      backend.createSnapshot({ snapshotKey: key, sourceKey: other.key, name: 'snap-1' }),
      FailureType.AlreadyExists,
      new RegExp(`of volume ${source.key}; requested "snap-1" \\(key ${key}\\) of volume ${other.key}`),
    );
    await expectDriverError(
      backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: other.key, name: 'snap-1' }),
      FailureType.AlreadyExists,
      /snapshot "snap-1"/,
    );
    expect(fixture.tree()).toEqual(before);
  });

  it('refuses bad keys, an absent source and a full pool, touching nothing', async () => {
    const backend = await fixture.opened(3 * GI);
    const source = await filledVolume(backend, { capacityBytes: 2 * GI });
    const before = fixture.tree();

    for (const snapshotKey of ['../x', 'A'.repeat(32), '', 'f'.repeat(31)]) {
      await expectDriverError(
        backend.createSnapshot({ snapshotKey, sourceKey: source.key, name: 's' }),
        FailureType.InvalidArgument,
        /snapshot key/,
      );
    }
    await expectDriverError(
      backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: '../../etc', name: 's' }),
      FailureType.InvalidArgument,
      /volume key/,
    );
    await expectDriverError(
      backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: '' }),
      FailureType.InvalidArgument,
    );
    await expectDriverError(backend.deleteSnapshot('../volumes'), FailureType.InvalidArgument);
    const absent = randomKey();
    await expectDriverError(
      backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: absent, name: 's' }),
      FailureType.NotFound,
      new RegExp(`volume ${absent} does not exist`),
    );
    await expectDriverError(
      backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 's' }),
      FailureType.ResourceExhausted,
      /cannot reserve 2Gi for snapshot "s".*1Gi of the pool's 3Gi is available/,
    );
    expect(fixture.tree()).toEqual(before);
  });

  it('keeps a snapshot independent of its volume, which may be deleted, and deletes it', async () => {
    const backend = await fixture.opened();
    const source = await filledVolume(backend);
    const key = randomKey();
    const snapshot = await backend.createSnapshot({ snapshotKey: key, sourceKey: source.key, name: 'snap' });
    const copied = contentOf(snapshot.path);

    fs.writeFileSync(path.join(source.path, 'data'), 'changed');
    expect(contentOf(snapshot.path)).toEqual(copied);
    expect(await backend.deleteVolume(source.key)).toEqual({ existed: true });
    expect(contentOf(snapshot.path)).toEqual(copied);
    expect(await backend.status()).toMatchObject({ reservedBytes: GI, volumeCount: 0, snapshotCount: 1 });

    expect(await backend.deleteSnapshot(key)).toBe('deleted');
    expect(await backend.deleteSnapshot(key)).toBe('absent');
    expect(fixture.list('snapshots/data')).toEqual([]);
    expect(fixture.list('snapshots/records')).toEqual([]);
    expect(fixture.list('snapshots/journal')).toEqual([]);
    expect(await backend.status()).toMatchObject({ reservedBytes: 0, snapshotCount: 0 });
    expect(fs.readFileSync(path.join(fixture.root, 'outside'), 'utf8')).toBe('not the pool');
  });

  it('rolls back a copy a crash interrupted, keeps one whose record was written, completes a delete', async () => {
    const crashed = await fixture.opened();
    const source = await filledVolume(crashed);
    const kept = await crashed.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 'kept' });
    const doomed = await crashed.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 'doomed' });
    // A crash mid-copy: the intent and half a copy, no record.
    const half = randomKey();
    await writeSnapshotIntent(layout, snapshotIntent('create', half, source.key));
    fs.mkdirSync(path.join(layout.snapshotDir(half), 'sub'), { recursive: true });
    fs.writeFileSync(path.join(layout.snapshotDir(half), 'data'), 'o');
    // A crash between the record and removing the intent.
    const recorded = randomKey();
    await writeSnapshotIntent(layout, snapshotIntent('create', recorded, source.key));
    fs.mkdirSync(layout.snapshotDir(recorded));
    const { path: _path, ...stored } = { ...kept, key: recorded, name: 'recorded' };
    await writeSnapshot(layout, stored);
    // A crash mid-delete.
    await writeSnapshotIntent(layout, snapshotIntent('delete', doomed.key, source.key));
    await crashed.close();

    const restarted = fixture.backend();
    const report = await restarted.open();

    expect(report.reconciled).toEqual(
      expect.arrayContaining([
        { key: half, op: 'snapshot-create', outcome: 'rolled-back' },
        { key: recorded, op: 'snapshot-create', outcome: 'kept' },
        { key: doomed.key, op: 'snapshot-delete', outcome: 'completed' },
      ]),
    );
    expect(report.reconciled).toHaveLength(3);
    expect(report.strays).toEqual([]);
    expect(fixture.exists('snapshots', 'data', half)).toBe(false);
    expect(fixture.exists('snapshots', 'data', doomed.key)).toBe(false);
    expect(fixture.list('snapshots/journal')).toEqual([]);
    expect((await restarted.listSnapshots()).map((s) => s.name).sort()).toEqual(['kept', 'recorded']);
    expect(await restarted.status()).toMatchObject({ reservedBytes: 3 * GI, snapshotCount: 2 });
  });

  it('reports copies and records no journal explains as strays, and leaves them', async () => {
    const crashed = await fixture.opened();
    const source = await filledVolume(crashed);
    await crashed.close();
    const stray = randomKey();
    fs.mkdirSync(layout.snapshotDir(stray));
    fs.writeFileSync(path.join(layout.snapshotRecordsDir, 'notes.txt'), 'x');

    const restarted = fixture.backend();
    const report = await restarted.open();
    expect(report.strays).toEqual(
      [layout.snapshotDir(stray), path.join(layout.snapshotRecordsDir, 'notes.txt')].sort(),
    );
    expect(fixture.exists('snapshots', 'data', stray)).toBe(true);
    await expectDriverError(
      restarted.createSnapshot({ snapshotKey: stray, sourceKey: source.key, name: 'stray' }),
      FailureType.FailedPrecondition,
      /exists without a record/,
    );
  });

  it('restores a snapshot into a new volume and clones a volume, each an independent copy', async () => {
    const backend = await fixture.opened();
    const source = await filledVolume(backend);
    const snapshot = await backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 's' });
    fs.writeFileSync(path.join(source.path, 'data'), 'after the snapshot');

    const restoreSpec = volume({
      name: 'restored',
      capacityBytes: 2 * GI,
      contentSource: { snapshotKey: snapshot.key },
    });
    const restored = await backend.createVolume(restoreSpec);
    expect(restored).toMatchObject({ capacityBytes: 2 * GI, contentSource: { snapshotKey: snapshot.key } });
    expect(contentOf(restored.path)).toEqual(contentOf(snapshot.path));
    expect(fs.readFileSync(path.join(restored.path, 'data'), 'utf8')).toBe('one');
    expect(await backend.createVolume(restoreSpec)).toEqual(restored);

    const clone = await backend.createVolume(volume({ name: 'clone', contentSource: { volumeKey: source.key } }));
    expect(fs.readFileSync(path.join(clone.path, 'data'), 'utf8')).toBe('after the snapshot');
    fs.writeFileSync(path.join(clone.path, 'data'), 'clone');
    expect(fs.readFileSync(path.join(source.path, 'data'), 'utf8')).toBe('after the snapshot');
    expect(await backend.status()).toMatchObject({ reservedBytes: 5 * GI, volumeCount: 3, snapshotCount: 1 });
    expect(fixture.list('journal')).toEqual([]);

    await expectDriverError(
      backend.createVolume({ ...restoreSpec, contentSource: { volumeKey: source.key } }),
      FailureType.AlreadyExists,
      /content source \(snapshot .*, requested volume /,
    );
  });

  it('refuses a restore that is smaller than its source or names what the pool lacks, creating nothing', async () => {
    const backend = await fixture.opened();
    const source = await filledVolume(backend, { capacityBytes: 2 * GI });
    const snapshot = await backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 's' });
    const before = fixture.tree();

    await expectDriverError(
      backend.createVolume(volume({ capacityBytes: GI, contentSource: { snapshotKey: snapshot.key } })),
      FailureType.OutOfRange,
      /asks for 1Gi, less than the 2Gi of its source \(snapshot [0-9a-f]{32}\)/,
    );
    await expectDriverError(
      backend.createVolume(volume({ capacityBytes: 2 * GI, contentSource: { snapshotKey: randomKey() } })),
      FailureType.NotFound,
      /snapshot [0-9a-f]{32} does not exist/,
    );
    await expectDriverError(
      backend.createVolume(volume({ capacityBytes: 2 * GI, contentSource: { volumeKey: randomKey() } })),
      FailureType.NotFound,
      /the source to clone/,
    );
    const bad: unknown[] = [
      { snapshotKey: '../x' },
      { volumeKey: 'x' },
      {},
      { snapshotKey: randomKey(), volumeKey: randomKey() },
    ];
    for (const contentSource of bad) {
      await expectDriverError(
        backend.createVolume({ ...volume(), contentSource } as CreateVolumeSpec),
        FailureType.InvalidArgument,
      );
    }
    const self = randomKey();
    await expectDriverError(
      backend.createVolume(volume({ key: self, contentSource: { volumeKey: self } })),
      FailureType.InvalidArgument,
      /cloned from itself/,
    );
    expect(fixture.tree()).toEqual(before);
  });

  it('answers status at once while a copy runs, counting what the copy will take', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered: () => void = () => undefined;
    const copyStarted = new Promise<void>((resolve) => (entered = resolve));
    class SlowCopy extends DirBackend {
      override async copyToSnapshot(source: StoredRecord, target: string, budgetMs: number): Promise<void> {
        entered();
        await held;
        await super.copyToSnapshot(source, target, budgetMs);
      }
    }
    const slow = new PoolFixture((options) => new SlowCopy({ ...options, quota: 'none' }));
    try {
      const backend = await slow.opened();
      const source = await backend.createVolume(volume());
      expect(await backend.status()).toMatchObject({ reservedBytes: GI, snapshotCount: 0 });
      const copying = backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 's' });
      await copyStarted;
      const during = await Promise.race([
        backend.status(),
        new Promise((resolve) => setTimeout(() => resolve('blocked'), 2000)),
      ]);
      expect(during).toMatchObject({ reservedBytes: 2 * GI, snapshotCount: 0 });
      release();
      await copying;
      expect(await backend.status()).toMatchObject({ reservedBytes: 2 * GI, snapshotCount: 1 });
    } finally {
      release();
      await slow.cleanup();
    }
  });

  /** A dir backend whose copies (snapshot, restore, clone) wait until the test lets them go, or fail. */
  function gatedFixture() {
    const gate = { release: (): void => undefined, fail: false, started: (): void => undefined };
    let held = new Promise<void>((resolve) => (gate.release = resolve));
    let started = new Promise<void>((resolve) => (gate.started = resolve));
    const wait = async () => {
      gate.started();
      await held;
      if (gate.fail) throw new Error('the copy failed');
    };
    class Gated extends DirBackend {
      override async copyToSnapshot(source: StoredRecord, target: string, budgetMs: number) {
        await wait();
        await super.copyToSnapshot(source, target, budgetMs);
      }
      override async copyIn(...args: Parameters<DirBackend['copyIn']>) {
        await wait();
        await super.copyIn(...args);
      }
    }
    const gated = new PoolFixture((options) => new Gated({ ...options, quota: 'none' }));
    /** The next copy waits again; resolves once the current one has started. */
    const copying = () => started;
    const rearm = () => {
      held = new Promise<void>((resolve) => (gate.release = resolve));
      started = new Promise<void>((resolve) => (gate.started = resolve));
    };
    return { gated, gate, copying, rearm };
  }

  it('while a copy runs without the pool held, nothing can delete or change its source or its target', async () => {
    const { gated, gate, copying, rearm } = gatedFixture();
    const pending: Promise<unknown>[] = [];
    try {
      const backend = await gated.opened(5 * GI);
      const source = await filledVolume(backend);
      const other = await backend.createVolume(volume());
      const key = randomKey();
      const snapping = backend.createSnapshot({ snapshotKey: key, sourceKey: source.key, name: 'snap-1' });
      pending.push(snapping);
      await copying();

      // Other volumes are served meanwhile; the copy's reservation counts (3 GiB of 5).
      const staging = path.join(gated.root, 'kubelet', 'staging');
      fs.mkdirSync(path.dirname(staging));
      await backend.stageVolume(other.key, staging, { accessType: 'mount', fsType: '', mountFlags: [] });
      await backend.unstageVolume(other.key, staging);
      await expectDriverError(backend.createVolume(volume({ capacityBytes: 3 * GI })), FailureType.ResourceExhausted);
      // Its source and its target: every change is Aborted (retryable), nothing is touched.
      await expectDriverError(backend.deleteVolume(source.key), FailureType.Aborted, /part of a copy in progress/);
      await expectDriverError(backend.expandVolume(source.key, 2 * GI), FailureType.Aborted);
      await expectDriverError(
        backend.stageVolume(source.key, staging, { accessType: 'mount', fsType: '', mountFlags: [] }),
        FailureType.Aborted,
      );
      await expectDriverError(backend.deleteSnapshot(key), FailureType.Aborted, /snapshot .* copy in progress/);
      await expectDriverError(
        backend.createSnapshot({ snapshotKey: key, sourceKey: source.key, name: 'snap-1' }),
        FailureType.Aborted,
      );
      await expectDriverError(
        backend.createVolume(volume({ contentSource: { volumeKey: source.key } })),
        FailureType.Aborted,
      );
      expect(gated.list('snapshots/journal')).toEqual([`${key}.json`]);

      gate.release();
      const snapshot = await snapping;
      expect(snapshot.key).toBe(key);
      expect(await backend.status()).toMatchObject({ reservedBytes: 3 * GI, snapshotCount: 1 });

      // A restore in flight: its source snapshot cannot be deleted, nor its target volume (no record yet).
      rearm();
      const target = volume({ contentSource: { snapshotKey: key } });
      const restoring = backend.createVolume(target);
      pending.push(restoring);
      await copying();
      await expectDriverError(backend.deleteSnapshot(key), FailureType.Aborted);
      await expectDriverError(backend.deleteVolume(target.key), FailureType.Aborted);
      await expectDriverError(backend.createVolume({ ...target }), FailureType.Aborted);
      gate.release();
      expect((await restoring).key).toBe(target.key);
      expect(fs.readFileSync(path.join(new PoolLayout(gated.pool).volumeDir(target.key), 'data'), 'utf8')).toBe('one');

      // A copy that fails is rolled back: no copy, no intent, no reservation left.
      rearm();
      gate.fail = true;
      const failing = backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 'snap-2' });
      pending.push(failing);
      await copying();
      gate.release();
      await expect(failing).rejects.toThrow('the copy failed');
      expect(gated.list('snapshots/data')).toEqual([key]);
      expect(gated.list('snapshots/journal')).toEqual([]);
      expect(await backend.status()).toMatchObject({ reservedBytes: 4 * GI, snapshotCount: 1 });
      expect(await backend.deleteSnapshot(key)).toBe('deleted');
      expect(await backend.deleteVolume(source.key)).toEqual({ existed: true });
    } finally {
      gate.release();
      await Promise.allSettled(pending);
      await gated.cleanup();
    }
  });

  it('rolls back a restore a crash interrupted mid-copy', async () => {
    const crashed = await fixture.opened();
    const source = await filledVolume(crashed);
    await crashed.close();
    const half = randomKey();
    await writeIntent(layout, { op: 'create', key: half, name: 'r', capacityBytes: GI, parameters: {}, at: '' });
    fs.mkdirSync(layout.volumeDir(half));
    fs.writeFileSync(path.join(layout.volumeDir(half), 'data'), 'o');

    const restarted = fixture.backend();
    expect((await restarted.open()).reconciled).toEqual([{ key: half, op: 'create', outcome: 'rolled-back' }]);
    expect(fixture.list('volumes')).toEqual([source.key]);
  });
});

describe('loop snapshots', () => {
  let fixture: PoolFixture<LoopBackend>;

  beforeEach(() => {
    fixture = new PoolFixture((options) => new LoopBackend(options), 'loop');
  });

  afterEach(async () => {
    await fixture.cleanup();
  });

  function coPath(...parts: string[]): string {
    const dir = path.join(fixture.root, 'kubelet');
    fs.mkdirSync(dir, { recursive: true });
    return path.join(dir, ...parts);
  }

  const MOUNT = { accessType: 'mount' as const, fsType: '', mountFlags: [] };
  const BLOCK = { accessType: 'block' as const, fsType: '', mountFlags: [] };

  it('copies a block image sparsely and restores it into a larger, fully allocated volume', async () => {
    const backend = await fixture.opened();
    const source = await backend.createVolume(volume({ accessType: 'block', capacityBytes: 32 * MiB }));
    const pattern = Buffer.alloc(MiB, 0xab);
    const handle = fs.openSync(source.path, 'r+');
    fs.writeSync(handle, pattern, 0, pattern.length, 3 * MiB);
    fs.closeSync(handle);

    const started = Date.now();
    const snapshot = await backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 's' });
    const snapshotMs = Date.now() - started;
    expect(snapshot).toMatchObject({
      sizeBytes: 32 * MiB,
      accessType: 'block',
      path: expect.stringMatching(/disk\.img$/),
    });
    expect(fs.statSync(snapshot.path).size).toBe(32 * MiB);
    // Sparse: the zeros of the preallocated image are holes in the copy.
    expect(fs.statSync(snapshot.path).blocks * 512).toBeLessThan(8 * MiB);
    expect(await backend.status()).toMatchObject({ reservedBytes: 64 * MiB, snapshotCount: 1 });

    const restoreStarted = Date.now();
    const restored = await backend.createVolume(
      volume({ accessType: 'block', capacityBytes: 48 * MiB, contentSource: { snapshotKey: snapshot.key } }),
    );
    const restoreMs = Date.now() - restoreStarted;
    expect(fs.statSync(restored.path).size).toBe(48 * MiB);
    expect(fs.statSync(restored.path).blocks * 512).toBeGreaterThanOrEqual(48 * MiB);
    const read = Buffer.alloc(MiB);
    const restoredHandle = fs.openSync(restored.path, 'r');
    fs.readSync(restoredHandle, read, 0, MiB, 3 * MiB);
    fs.closeSync(restoredHandle);
    expect(read.equals(pattern)).toBe(true);
    console.log(`loop 32 MiB block: snapshot ${snapshotMs} ms, restore to 48 MiB ${restoreMs} ms`);

    await expectDriverError(
      backend.createVolume(volume({ capacityBytes: 48 * MiB, contentSource: { snapshotKey: snapshot.key } })),
      FailureType.InvalidArgument,
      /holds accessType block; volume .* asks for mount/,
    );
    expect(await backend.deleteVolume(source.key)).toEqual({ existed: true });
    expect(await backend.deleteSnapshot(snapshot.key)).toBe('deleted');
    expect(fixture.list('snapshots/data')).toEqual([]);
  });

  it('freezes a staged filesystem around the copy; the restore keeps the source filesystem and the data', async () => {
    const backend = await fixture.opened();
    const source = await backend.createVolume(volume({ capacityBytes: 300 * MiB, fsType: 'xfs' }));
    const staging = coPath('staging');
    await backend.stageVolume(source.key, staging, MOUNT);
    fs.writeFileSync(path.join(staging, 'data'), 'written while staged');

    const snapshot = await backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 's' });
    expect(snapshot).toMatchObject({ accessType: 'mount', fsType: 'xfs' });
    // Thawed again: the workload can write.
    fs.writeFileSync(path.join(staging, 'after'), 'after the snapshot');

    // No fsType asked: the source's (xfs), not the backend's default (ext4).
    const restored = await backend.createVolume(
      volume({ capacityBytes: 300 * MiB, contentSource: { snapshotKey: snapshot.key } }),
    );
    expect(restored).toMatchObject({ accessType: 'mount', fsType: 'xfs' });
    const clone = await backend.createVolume(
      volume({ capacityBytes: 300 * MiB, contentSource: { volumeKey: source.key } }),
    );
    // Restored larger: xfs grows when staged (only a mounted xfs can grow).
    const larger = await backend.createVolume(
      volume({ capacityBytes: 400 * MiB, contentSource: { snapshotKey: snapshot.key } }),
    );
    const largerAt = coPath('staging-larger');
    await backend.stageVolume(larger.key, largerAt, MOUNT);
    const bytes = (at: string) => fs.statfsSync(at).blocks * fs.statfsSync(at).bsize;
    expect(bytes(largerAt)).toBeGreaterThan(bytes(staging) + 90 * MiB);
    await backend.unstageVolume(larger.key, largerAt);
    // Staged while their source still is: each copy carries the source's xfs UUID (mounted nouuid).
    for (const [record, expected] of [
      [restored, ['data']],
      [clone, ['after', 'data']],
    ] as const) {
      const at = coPath(`staging-${record.key}`);
      await backend.stageVolume(record.key, at, MOUNT);
      expect(
        fs
          .readdirSync(at)
          .filter((name) => name !== 'lost+found')
          .sort(),
      ).toEqual(expected);
      expect(fs.readFileSync(path.join(at, 'data'), 'utf8')).toBe('written while staged');
      await backend.unstageVolume(record.key, at);
      expect(isMountPoint(at)).toBe(false);
    }
    await backend.unstageVolume(source.key, staging);
    await expectDriverError(
      backend.createVolume(
        volume({ capacityBytes: 300 * MiB, fsType: 'ext4', contentSource: { snapshotKey: snapshot.key } }),
      ),
      FailureType.InvalidArgument,
      /holds fsType xfs/,
    );
    expect(loopDevicesOf(source.path)).toEqual([]);
  });

  it('thaws what a journaled freeze left frozen: before the next change, and when the pool opens again', async () => {
    const backend = await fixture.opened();
    const source = await backend.createVolume(volume({ capacityBytes: 64 * MiB }));
    const staging = coPath('staging');
    await backend.stageVolume(source.key, staging, MOUNT);
    const layout = new PoolLayout(fixture.pool);
    const mountPoint = fs.realpathSync(staging);
    const majorMinor = majorMinorOf(fs.statSync(mountPoint, { bigint: true }).dev);
    const freeze = { key: source.key, mountPoint, majorMinor, bootId: await currentBootId(), at: '' };
    /** What an agent killed mid-copy leaves: the record, and the volume's filesystem frozen. */
    const killedMidCopy = async (bootId = freeze.bootId) => {
      await writeFreeze(layout, { ...freeze, bootId });
      execFileSync('fsfreeze', ['--freeze', mountPoint]);
      expect(isFrozen(mountPoint)).toBe(true);
    };
    try {
      // The retried snapshot: its call thaws first (else its own freeze fails with EBUSY for ever), then copies.
      await killedMidCopy();
      await backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 's-1' });
      expect(isFrozen(mountPoint)).toBe(false);
      expect(fixture.list('frozen')).toEqual([]);

      // The agent started again: open() thaws, and says so.
      await killedMidCopy();
      const reopened = fixture.backend();
      expect((await reopened.open()).repaired).toEqual([
        { key: source.key, outcome: 'thawed', message: expect.stringMatching(/left frozen/) },
      ]);
      expect(isFrozen(mountPoint)).toBe(false);
      expect(fixture.list('frozen')).toEqual([]);

      // A record of an earlier boot is only removed: a reboot thawed everything (this freeze is someone else's).
      await killedMidCopy('an-earlier-boot');
      expect((await fixture.backend().open()).repaired).toEqual([]);
      expect(fixture.list('frozen')).toEqual([]);
      expect(isFrozen(mountPoint)).toBe(true);
    } finally {
      spawnSync('fsfreeze', ['--unfreeze', mountPoint]);
    }
    await backend.unstageVolume(source.key, staging);
  });

  /**
   * A staging record outlives its mount when an unstage unmounted and its detach failed ("busy"), when xfs growth
   * failed after the mount, or when a restage after a reboot failed. The staging path is then a plain directory of
   * the filesystem holding it, which on a node is /var, where the pool lies too: freezing it would hold the copy's
   * own writes, and the thaw after the copy would never come. Here that filesystem is one of the test's own.
   */
  it('never freezes the filesystem holding a staging path whose mount is gone; copies the idle filesystem', async () => {
    let host = '';
    const onHost = new PoolFixture(
      (options) => new LoopBackend({ ...options, pool: path.join(host, 'pool') }),
      'lhost',
    );
    host = path.join(onHost.root, 'host');
    mountPoolFilesystem('ext4', path.join(onHost.root, 'host.img'), host, GI);
    // Never a freeze of the machine's own filesystems: the staging path lies on the test's filesystem.
    expect(isMountPoint(host)).toBe(true);
    let snapping: Promise<unknown> | undefined;
    try {
      const backend = await onHost.opened();
      const source = await backend.createVolume(volume({ capacityBytes: 64 * MiB }));
      const staging = path.join(host, 'kubelet', 'staging');
      fs.mkdirSync(path.dirname(staging));
      await backend.stageVolume(source.key, staging, MOUNT);
      fs.writeFileSync(path.join(staging, 'data'), 'before the failed unstage');
      // The unstage whose detach failed: the mount is gone, the record and the device are left.
      execFileSync('umount', [staging]);
      expect(isMountPoint(staging)).toBe(false);
      expect(loopDevicesOf(source.path)).toHaveLength(1);

      const key = randomKey();
      snapping = backend.createSnapshot({ snapshotKey: key, sourceKey: source.key, name: 's' });
      const outcome = await Promise.race([
        snapping.then(
          () => 'done',
          (error: unknown) => error,
        ),
        new Promise((resolve) => setTimeout(() => resolve('hung: the copy waits on a frozen filesystem'), 10_000)),
      ]);
      expect(outcome).toBe('done');
      fs.writeFileSync(path.join(host, 'written-after'), 'the host filesystem takes writes');
      const restored = await backend.createVolume(
        volume({ capacityBytes: 64 * MiB, contentSource: { snapshotKey: key } }),
      );
      const at = path.join(host, 'kubelet', 'restored');
      await backend.stageVolume(restored.key, at, MOUNT);
      expect(fs.readFileSync(path.join(at, 'data'), 'utf8')).toBe('before the failed unstage');
      await backend.unstageVolume(restored.key, at);
      expect(fs.readdirSync(path.join(host, 'pool', 'snapshots', 'journal'))).toEqual([]);
      expect(fs.readdirSync(path.join(host, 'pool', 'frozen'))).toEqual([]);
    } finally {
      // Should the code under test have frozen the test's filesystem, thaw it so that the copy ends and cleanup runs.
      try {
        execFileSync('fsfreeze', ['--unfreeze', host], { stdio: 'ignore' });
      } catch {
        // not frozen
      }
      await snapping?.catch(() => undefined);
      await onHost.cleanup();
    }
  });

  it('snapshots and clones a volume staged for raw block access by one reflink, where the pool has reflinks', async () => {
    fixture.onFilesystem('xfs-reflink');
    const backend = await fixture.opened();
    const source = await backend.createVolume(volume({ accessType: 'block', capacityBytes: 16 * MiB }));
    await backend.stageVolume(source.key, coPath('staging-block'), BLOCK);
    const [device] = loopDevicesOf(source.path);
    const writeDevice = (byte: number) => {
      const handle = fs.openSync(device as string, 'r+');
      fs.writeSync(handle, Buffer.alloc(MiB, byte), 0, MiB, 2 * MiB);
      fs.fsyncSync(handle);
      fs.closeSync(handle);
    };
    const readAt = (file: string) => {
      const read = Buffer.alloc(MiB);
      const handle = fs.openSync(file, 'r');
      fs.readSync(handle, read, 0, MiB, 2 * MiB);
      fs.closeSync(handle);
      return read;
    };
    writeDevice(0xaa);

    const snapshot = await backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 's' });
    const clone = await backend.createVolume(
      volume({ accessType: 'block', capacityBytes: 16 * MiB, contentSource: { volumeKey: source.key } }),
    );
    writeDevice(0xbb);

    expect(readAt(snapshot.path).equals(Buffer.alloc(MiB, 0xaa))).toBe(true);
    expect(readAt(clone.path).equals(Buffer.alloc(MiB, 0xaa))).toBe(true);
    expect(readAt(source.path).equals(Buffer.alloc(MiB, 0xbb))).toBe(true);
    expect(fs.statSync(snapshot.path).size).toBe(16 * MiB);
    expect(await backend.status()).toMatchObject({ snapshotCount: 1 });
    await backend.unstageVolume(source.key, coPath('staging-block'));
    expect(await backend.deleteSnapshot(snapshot.key)).toBe('deleted');
  });

  it('refuses to snapshot a volume staged for raw block access on a pool without reflinks, creating nothing', async () => {
    fixture.onFilesystem('ext4');
    const backend = await fixture.opened();
    const source = await backend.createVolume(volume({ accessType: 'block', capacityBytes: 16 * MiB }));
    const staging = coPath('staging-block');
    await backend.stageVolume(source.key, staging, BLOCK);
    const before = fixture.list('snapshots/data');

    await expectDriverError(
      backend.createSnapshot({ snapshotKey: randomKey(), sourceKey: source.key, name: 's' }),
      FailureType.FailedPrecondition,
      /staged for raw block access .*has no reflinks.*unstage it/,
    );
    expect(fixture.list('snapshots/data')).toEqual(before);
    expect(fixture.list('snapshots/journal')).toEqual([]);
    expect((await backend.status()).reservedBytes).toBe(16 * MiB);
    await backend.unstageVolume(source.key, staging);
  });
});

/**
 * Group snapshots (docs/snapshots.md, "Group snapshots"): every member of one instant, on real loop images, devices
 * and mounts, and pools on their own XFS with reflinks or ext4 without.
 */
describe('group snapshots', () => {
  let fixture: PoolFixture<LoopBackend>;

  beforeEach(() => {
    fixture = new PoolFixture((options) => new LoopBackend(options), 'group');
  });

  afterEach(async () => {
    await fixture.cleanup();
  });

  function coPath(...parts: string[]): string {
    const dir = path.join(fixture.root, 'kubelet');
    fs.mkdirSync(dir, { recursive: true });
    return path.join(dir, ...parts);
  }

  const MOUNT = { accessType: 'mount' as const, fsType: '', mountFlags: [] };
  const BLOCK = { accessType: 'block' as const, fsType: '', mountFlags: [] };

  async function members(backend: LoopBackend, shapes: ('mount' | 'block')[]) {
    const made = [];
    for (const accessType of shapes) {
      const record = await backend.createVolume(volume({ accessType, capacityBytes: 64 * MiB }));
      const staging = coPath(`staging-${record.key}`);
      await backend.stageVolume(record.key, staging, accessType === 'block' ? BLOCK : MOUNT);
      made.push({ record, staging, snapshotKey: randomKey() });
    }
    return made;
  }

  const spec = (groupKey: string, made: { record: { key: string }; snapshotKey: string }[]) => ({
    groupKey,
    name: 'group',
    members: made.map((member) => ({ snapshotKey: member.snapshotKey, sourceKey: member.record.key })),
  });

  async function unstageAll(backend: LoopBackend, made: { record: { key: string }; staging: string }[]) {
    for (const member of made) await backend.unstageVolume(member.record.key, member.staging);
  }

  it('takes one raw block member by reflink within the others freeze, and deletes the members with the group only', async () => {
    fixture.onFilesystem('xfs-reflink');
    const backend = await fixture.opened();
    const made = await members(backend, ['mount', 'mount', 'block']);
    for (const member of made.slice(0, 2)) fs.writeFileSync(path.join(member.staging, 'data'), member.record.key);
    const groupKey = randomKey();

    const records = await backend.createGroupSnapshot(spec(groupKey, made));
    expect(records.map((record) => record.groupKey)).toEqual([groupKey, groupKey, groupKey]);
    expect(new Set(records.map((record) => record.createdAt)).size).toBe(1);
    expect(fixture.list('snapshots/journal')).toEqual([]);
    expect(fixture.list('frozen')).toEqual([]);
    for (const member of made.slice(0, 2)) expect(isFrozen(member.staging)).toBe(false);
    // The same group again: the members made, not new copies.
    expect(await backend.createGroupSnapshot(spec(groupKey, made))).toEqual(records);

    await expectDriverError(
      backend.deleteSnapshot(records[0]!.key),
      FailureType.FailedPrecondition,
      /member of group snapshot .* deleted with it only/,
    );
    await expectDriverError(
      backend.deleteGroupSnapshot(groupKey, [records[0]!.key, records[1]!.key]),
      FailureType.InvalidArgument,
      /do not match group snapshot .* members .* are not named/,
    );
    expect(fixture.list('snapshots/data')).toHaveLength(3);
    expect(
      await backend.deleteGroupSnapshot(
        groupKey,
        records.map((record) => record.key),
      ),
    ).toBe('deleted');
    expect(fixture.list('snapshots/data')).toEqual([]);
    expect(
      await backend.deleteGroupSnapshot(
        groupKey,
        records.map((record) => record.key),
      ),
    ).toBe('absent');
    await unstageAll(backend, made);
  });

  it('refuses two members in use as raw block devices (two instants), freezing and creating nothing', async () => {
    fixture.onFilesystem('xfs-reflink');
    const backend = await fixture.opened();
    const made = await members(backend, ['mount', 'block', 'block']);
    await expectDriverError(
      backend.createGroupSnapshot(spec(randomKey(), made)),
      FailureType.FailedPrecondition,
      /staged for raw block access.*at most one volume in use as a raw block device/,
    );
    expect(fixture.list('snapshots/data')).toEqual([]);
    expect(fixture.list('snapshots/journal')).toEqual([]);
    expect(fixture.list('frozen')).toEqual([]);
    expect(isFrozen(made[0]!.staging)).toBe(false);
    expect((await backend.status()).reservedBytes).toBe(3 * 64 * MiB);
    await unstageAll(backend, made);
  });

  it('without reflinks, copies frozen filesystems but refuses a raw block member in use, thawing every member', async () => {
    fixture.onFilesystem('ext4');
    const backend = await fixture.opened();
    const frozenOnly = await members(backend, ['mount', 'mount']);
    fs.writeFileSync(path.join(frozenOnly[0]!.staging, 'data'), 'frozen and copied');
    const records = await backend.createGroupSnapshot(spec(randomKey(), frozenOnly));
    expect(records).toHaveLength(2);
    for (const member of frozenOnly) expect(isFrozen(member.staging)).toBe(false);

    const withRaw = await members(backend, ['mount', 'block']);
    await expectDriverError(
      backend.createGroupSnapshot(spec(randomKey(), withRaw)),
      FailureType.FailedPrecondition,
      /staged for raw block access.*has no reflinks.*unstage it/,
    );
    expect(fixture.list('snapshots/data').sort()).toEqual(records.map((record) => record.key).sort());
    expect(fixture.list('snapshots/journal')).toEqual([]);
    expect(fixture.list('frozen')).toEqual([]);
    expect(isFrozen(withRaw[0]!.staging)).toBe(false);
    await unstageAll(backend, [...frozenOnly, ...withRaw]);
  });

  it('copies the whole group again where a crash left part of it recorded', async () => {
    const backend = await fixture.opened();
    const made = [];
    for (let index = 0; index < 3; index++) {
      made.push({ record: await backend.createVolume(volume({ capacityBytes: 16 * MiB })), snapshotKey: randomKey() });
    }
    const groupKey = randomKey();
    const layout = new PoolLayout(fixture.pool);
    // What a crash between two record writes leaves once open() settled it: one member recorded, no intents.
    const first = made[0]!;
    fs.mkdirSync(layout.snapshotDir(first.snapshotKey), { recursive: true });
    fs.copyFileSync(first.record.path, layout.snapshotImage(first.snapshotKey));
    await writeSnapshot(layout, {
      key: first.snapshotKey,
      name: `group/${first.record.key}`,
      sourceKey: first.record.key,
      sizeBytes: 16 * MiB,
      createdAt: '2026-01-01T00:00:00.000Z',
      accessType: 'mount',
      fsType: 'ext4',
      groupKey,
    });
    await backend.close();
    const restarted = await fixture.opened();

    const records = await restarted.createGroupSnapshot(spec(groupKey, made));
    expect(records).toHaveLength(3);
    expect(new Set(records.map((record) => record.createdAt)).size).toBe(1);
    expect(records[0]!.createdAt).not.toBe('2026-01-01T00:00:00.000Z');
    expect(fixture.list('snapshots/data').sort()).toEqual(made.map((member) => member.snapshotKey).sort());
    expect(fixture.list('snapshots/journal')).toEqual([]);
  });

  it('refuses a dir volume in use (a directory cannot be frozen), creating nothing', async () => {
    const dir = new PoolFixture();
    try {
      const backend = await dir.opened();
      const idle = await backend.createVolume(volume({ capacityBytes: 16 * MiB }));
      const used = await backend.createVolume(volume({ capacityBytes: 16 * MiB }));
      const staging = path.join(dir.root, 'staging');
      fs.mkdirSync(staging);
      await backend.stageVolume(used.key, staging, MOUNT);
      const group = {
        groupKey: randomKey(),
        name: 'group',
        members: [idle, used].map((record) => ({ snapshotKey: randomKey(), sourceKey: record.key })),
      };
      await expectDriverError(
        backend.createGroupSnapshot(group),
        FailureType.FailedPrecondition,
        /only of volumes nobody uses.*staged at/,
      );
      expect(dir.list('snapshots/data')).toEqual([]);
      expect(dir.list('snapshots/journal')).toEqual([]);
      await backend.unstageVolume(used.key, staging);
      expect(await backend.createGroupSnapshot(group)).toHaveLength(2);
    } finally {
      await dir.cleanup();
    }
  });
});
