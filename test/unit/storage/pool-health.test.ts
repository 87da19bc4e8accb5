/**
 * Volume and pool health (NodeGetVolumeHealth, NodeGetStorageHealth, NodeGetVolumeStats' condition) against real
 * loop devices, mounts and a pool disk of its own: each condition is made for real, seen with its status and a
 * message that says what to do, and seen to clear once it is mended.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { FailureType } from '../../../common/failures';
import { LoopBackend } from '../../../storage/loop/loop-backend';
import { expectDriverError } from '../../support/driver-error';
import { loopDevicesOf } from './mount-helpers';
import { PoolFixture, randomKey } from './pool-fixture';

const MiB = 1024 ** 2;
const MOUNT = { accessType: 'mount' as const, fsType: '', mountFlags: [] };

let fixture: PoolFixture<LoopBackend>;

beforeEach(() => {
  fixture = new PoolFixture((options) => new LoopBackend(options), 'loop').onFilesystem('ext4', 256 * MiB);
});

afterEach(async () => {
  await fixture.cleanup();
});

async function withVolume() {
  const backend = await fixture.opened(200 * MiB);
  const record = await backend.createVolume({
    key: randomKey(),
    name: `pvc-${randomKey().slice(0, 8)}`,
    capacityBytes: 16 * MiB,
    parameters: {},
  });
  return { backend, key: record.key, image: record.path };
}

function staging(): string {
  const dir = path.join(fixture.root, 'kubelet', 'staging');
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  return dir;
}

it('is healthy when nothing is wrong, and NotFound for a volume the pool does not hold', async () => {
  const { backend, key } = await withVolume();
  expect(await backend.volumeHealth(key)).toEqual([]);
  expect(await backend.poolHealth()).toEqual([]);
  await expectDriverError(backend.volumeHealth(randomKey()), FailureType.NotFound);
});

it('reports a staged volume whose loop device was detached, in health and stats, until it is staged again', async () => {
  const { backend, key, image } = await withVolume();
  const at = staging();
  await backend.stageVolume(key, at, MOUNT);
  execFileSync('umount', [at]);
  for (const device of loopDevicesOf(image)) execFileSync('losetup', ['--detach', device]);

  const problems = await backend.volumeHealth(key);
  expect(problems).toEqual([
    {
      status: 'inaccessible',
      reason: 'DeviceDetached',
      message: expect.stringMatching(new RegExp(`staged at ${at} but has no device attached.*restart the node agent`)),
    },
  ]);
  expect(await backend.volumeStats(key, at)).toMatchObject({ abnormal: true, problems });
  expect(await backend.poolHealth()).toEqual([]); // the pool itself is fine

  await backend.stageVolume(key, at, MOUNT);
  expect(await backend.volumeHealth(key)).toEqual([]);
  expect(await backend.volumeStats(key, at)).toMatchObject({ abnormal: false, problems: [] });
  await backend.unstageVolume(key, at);
});

it('reports a volume whose image is gone from a mounted pool as data loss', async () => {
  const { backend, key, image } = await withVolume();
  fs.rmSync(image);
  expect(await backend.volumeHealth(key)).toEqual([
    { status: 'data-loss', reason: 'VolumeDataMissing', message: expect.stringMatching(/restore the claim/) },
  ]);
});

it('reports a pool remounted read-only as degraded, on the pool and its volumes, until it is read-write again', async () => {
  const { backend, key } = await withVolume();
  execFileSync('mount', ['-o', 'remount,ro', fixture.pool]);
  try {
    const [problem] = await backend.poolHealth();
    expect(problem).toEqual({
      status: 'degraded',
      reason: 'PoolReadOnly',
      message: expect.stringMatching(/is read-only: volumes can be read, not written.*mount it read-write again/),
    });
    expect(await backend.volumeHealth(key)).toEqual([{ ...problem, status: 'degraded' }]);
  } finally {
    execFileSync('mount', ['-o', 'remount,rw', fixture.pool]);
  }
  expect(await backend.poolHealth()).toEqual([]);
  expect(await backend.volumeHealth(key)).toEqual([]);
});

it('reports a pool that an ext4 error made read-only as degraded, though mountinfo still says rw, until it is repaired', async () => {
  const { backend, key } = await withVolume();
  const device = execFileSync('findmnt', ['-n', '-o', 'SOURCE', '--target', fixture.pool], { encoding: 'utf8' }).trim();
  // Only ever the fixture's own loop device: the error below stops every write to the filesystem it hits.
  expect(device).toMatch(/^\/dev\/loop\d+$/);
  execFileSync('mount', ['-o', 'remount,errors=remount-ro', fixture.pool]);
  // What a disk error does: ext4 aborts its journal and stops writes (the kernel log says "Remounting filesystem
  // read-only"), while mountinfo keeps `rw` on current kernels.
  fs.writeFileSync(`/sys/fs/ext4/${path.basename(device)}/trigger_fs_error`, '1');
  expect(() => fs.writeFileSync(path.join(fixture.pool, 'written'), 'x')).toThrow(/EROFS/);

  const [problem] = await backend.poolHealth();
  expect(problem).toEqual({
    status: 'degraded',
    reason: 'PoolReadOnly',
    message: expect.stringMatching(/refuses writes \(EROFS\), though mounted read-write.*mount it read-write again/),
  });
  expect(await backend.volumeHealth(key)).toEqual([{ ...problem, status: 'degraded' }]);

  // Repaired as an operator would: the pool closed, its disk unmounted, checked, mounted again, the pool opened.
  await backend.close();
  execFileSync('umount', [fixture.pool]);
  try {
    execFileSync('e2fsck', ['-fy', device], { stdio: 'pipe' });
  } catch (error) {
    expect((error as { status?: number }).status).toBe(1); // errors corrected
  }
  execFileSync('mount', [device, fixture.pool]);
  const repaired = await fixture.opened(200 * MiB);
  expect(await repaired.poolHealth()).toEqual([]);
  expect(await repaired.volumeHealth(key)).toEqual([]);
  expect(fs.existsSync(path.join(fixture.pool, '.write-probe'))).toBe(false);
});

it('reports a pool whose XFS shut down after an error as unreachable (not as unmounted), until it is mounted again', async () => {
  await fixture.cleanup();
  fixture = new PoolFixture((options) => new LoopBackend(options), 'loop').onFilesystem('xfs-reflink', 512 * MiB);
  const { backend, key } = await withVolume();
  const device = execFileSync('findmnt', ['-n', '-o', 'SOURCE', '--target', fixture.pool], { encoding: 'utf8' }).trim();
  expect(device).toMatch(/^\/dev\/loop\d+$/);
  // What XFS does on a metadata or disk error: every read and write of the filesystem fails with EIO.
  execFileSync('xfs_io', ['-x', '-c', 'shutdown', fixture.pool]);

  const [problem] = await backend.poolHealth();
  expect(problem).toEqual({
    status: 'unreachable',
    reason: 'PoolIOError',
    message: expect.stringMatching(/holding pool .* fails reads \(EIO reading .*pool\.json\).*repair it/),
  });
  expect(await backend.volumeHealth(key)).toEqual([{ ...problem, status: 'inaccessible' }]);

  // Repaired: the pool closed, its filesystem unmounted and mounted again (XFS replays its log), the pool opened.
  await backend.close();
  execFileSync('umount', [fixture.pool]);
  execFileSync('mount', [device, fixture.pool]);
  const repaired = await fixture.opened(200 * MiB);
  expect(await repaired.poolHealth()).toEqual([]);
  expect(await repaired.volumeHealth(key)).toEqual([]);
});

it('answers within seconds while the pool filesystem is frozen, and checks writes again once it is thawed', async () => {
  const { backend, key } = await withVolume();
  const device = execFileSync('findmnt', ['-n', '-o', 'SOURCE', '--target', fixture.pool], { encoding: 'utf8' }).trim();
  expect(device).toMatch(/^\/dev\/loop\d+$/); // only ever the fixture's own filesystem is frozen
  execFileSync('fsfreeze', ['--freeze', fixture.pool]);
  try {
    for (let call = 0; call < 2; call++) {
      const started = Date.now();
      expect(await backend.poolHealth()).toEqual([]); // a write that waits for the thaw judges nothing
      expect(await backend.volumeHealth(key)).toEqual([]);
      expect(Date.now() - started).toBeLessThan(10_000);
    }
  } finally {
    execFileSync('fsfreeze', ['--unfreeze', fixture.pool]);
  }
  // The write that waited goes through at the thaw, and leaves nothing behind.
  expect(await backend.poolHealth()).toEqual([]);
  expect(fs.existsSync(path.join(fixture.pool, '.write-probe'))).toBe(false);
  execFileSync('mount', ['-o', 'remount,ro', fixture.pool]);
  try {
    expect((await backend.poolHealth()).map((problem) => problem.reason)).toEqual(['PoolReadOnly']);
  } finally {
    execFileSync('mount', ['-o', 'remount,rw', fixture.pool]);
  }
});

it('reports a full pool filesystem as degraded until space is freed', async () => {
  const { backend, key } = await withVolume();
  const filler = path.join(fixture.pool, 'filler');
  const free = fs.statfsSync(fixture.pool);
  execFileSync('fallocate', ['-l', String(free.bavail * free.bsize - 512 * 1024), filler]);

  const [problem] = await backend.poolHealth();
  expect(problem).toEqual({
    status: 'degraded',
    reason: 'PoolFull',
    message: expect.stringMatching(/is full \(.* free\): new volumes, snapshots and expansions are refused.*Free/),
  });
  expect(await backend.volumeHealth(key)).toEqual([problem]);

  fs.rmSync(filler);
  expect(await backend.poolHealth()).toEqual([]);
  expect(await backend.volumeHealth(key)).toEqual([]);
});

it('reports a pool whose disk was unmounted as unreachable, its volumes inaccessible, until it is mounted again', async () => {
  const { backend, key } = await withVolume();
  const disk = fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .find((line) => line.includes(` ${fs.realpathSync(fixture.pool)} `))!
    .split(' - ')[1]!
    .split(' ')[1]!;
  execFileSync('umount', [fixture.pool]);
  try {
    const [problem] = await backend.poolHealth();
    expect(problem).toEqual({
      status: 'unreachable',
      reason: 'PoolNotMounted',
      message: expect.stringMatching(/holds no pool identity, not the open pool .*Mount the disk holding pool/),
    });
    expect(await backend.volumeHealth(key)).toEqual([{ ...problem, status: 'inaccessible' }]);
    // The record cannot be read with the disk away: an ID of this pool is inaccessible, never NotFound.
    expect(await backend.volumeHealth(randomKey())).toEqual([{ ...problem, status: 'inaccessible' }]);
    const stats = await backend.volumeStats(key, fixture.root);
    expect(stats).toMatchObject({ abnormal: true, message: problem!.message });
  } finally {
    execFileSync('mount', [disk, fixture.pool]);
  }
  expect(await backend.poolHealth()).toEqual([]);
  expect(await backend.volumeHealth(key)).toEqual([]);
});
