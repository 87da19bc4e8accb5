/** The node side of the dir backend: bind mounts of the volume directory (real mounts; the tests run as root). */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { FailureType } from '../../../common/failures';
import type { DirBackend } from '../../../storage/dir/dir-backend';
import { isMountPoint } from './mount-helpers';
import { expectDriverError } from '../../support/driver-error';
import { GI, PoolFixture, randomKey } from './pool-fixture';

let fixture: PoolFixture;
let backend: DirBackend;

beforeEach(async () => {
  fixture = new PoolFixture();
  backend = await fixture.opened(10 * GI);
});

afterEach(async () => {
  await fixture.cleanup();
});

function coPath(name: string): string {
  fs.mkdirSync(path.join(fixture.root, 'kubelet'), { recursive: true });
  return path.join(fixture.root, 'kubelet', name);
}

async function createVolume(name = 'pvc-1') {
  return backend.createVolume({ key: randomKey(), name, capacityBytes: GI, parameters: {} });
}

const MOUNT = { accessType: 'mount' as const, fsType: 'ext4', mountFlags: [] };

it('stages and publishes the volume directory, read-only when asked, and undoes it all', async () => {
  const volume = await createVolume();
  fs.writeFileSync(path.join(volume.path, 'data'), 'in the pool');
  const staging = coPath('staging');
  const target = coPath('target');

  await backend.stageVolume(volume.key, staging, MOUNT);
  await backend.stageVolume(volume.key, staging, MOUNT);
  await backend.publishVolume(volume.key, staging, target, { accessType: 'mount', readonly: true });
  await backend.publishVolume(volume.key, staging, target, { accessType: 'mount', readonly: true });
  expect(fs.readFileSync(path.join(target, 'data'), 'utf8')).toBe('in the pool');
  expect(() => fs.writeFileSync(path.join(target, 'more'), 'x')).toThrow(/EROFS/);
  const stats = await backend.volumeStats(volume.key, target);
  expect(stats.abnormal).toBe(false);
  expect(stats.usage.map((usage) => usage.unit)).toEqual(['bytes', 'inodes']);

  await backend.unpublishVolume(volume.key, target);
  await backend.unstageVolume(volume.key, staging);
  expect(fs.existsSync(target)).toBe(false);
  expect(isMountPoint(staging)).toBe(false);
  expect(fixture.list('staging')).toEqual([]);
  expect(fs.readFileSync(path.join(volume.path, 'data'), 'utf8')).toBe('in the pool');
});

it('refuses block access, and deleting a staged volume', async () => {
  const volume = await createVolume();
  const staging = coPath('staging');
  await expectDriverError(
    backend.stageVolume(volume.key, staging, { ...MOUNT, accessType: 'block' }),
    FailureType.InvalidArgument,
    /loop backend/,
  );
  await expectDriverError(
    backend.createVolume({ key: randomKey(), name: 'raw', capacityBytes: GI, parameters: {}, accessType: 'block' }),
    FailureType.InvalidArgument,
  );

  await backend.stageVolume(volume.key, staging, MOUNT);
  fs.writeFileSync(path.join(staging, 'data'), 'keep');
  await expectDriverError(
    backend.deleteVolume(volume.key),
    FailureType.FailedPrecondition,
    /is staged at .*unstage it/,
  );
  expect(fs.readFileSync(path.join(volume.path, 'data'), 'utf8')).toBe('keep');
  await backend.unstageVolume(volume.key, staging);
  expect(await backend.deleteVolume(volume.key)).toEqual({ existed: true });
});

it('grows only the reservation, and answers for the path it is mounted at', async () => {
  const volume = await createVolume();
  const staging = coPath('staging');
  await backend.stageVolume(volume.key, staging, MOUNT);

  expect(await backend.expandVolume(volume.key, 2 * GI)).toEqual({
    capacityBytes: 2 * GI,
    nodeExpansionRequired: false,
  });
  expect((await backend.status()).reservedBytes).toBe(2 * GI);
  expect(await backend.expandFilesystem(volume.key, staging)).toEqual({ capacityBytes: 2 * GI });
  await expectDriverError(backend.expandFilesystem(volume.key, fixture.root), FailureType.NotFound);
  await expectDriverError(backend.expandVolume(randomKey(), GI), FailureType.NotFound);
  await backend.unstageVolume(volume.key, staging);
});

it('mounts the staging again when the pool is reopened after a reboot', async () => {
  const volume = await createVolume();
  const staging = coPath('staging');
  await backend.stageVolume(volume.key, staging, MOUNT);
  await backend.close();
  execFileSync('umount', [staging]);

  const report = await fixture.backend().open();
  expect(report.repaired).toEqual([{ key: volume.key, outcome: 'restaged', message: expect.any(String) }]);
  expect(isMountPoint(staging)).toBe(true);
});

it('after a reboot that took the staging directory too, reports it, and stages again when asked', async () => {
  const volume = await createVolume();
  const staging = coPath('staging');
  await backend.stageVolume(volume.key, staging, MOUNT);
  await backend.close();
  execFileSync('umount', [staging]);
  fs.rmdirSync(staging);

  const reopened = fixture.backend();
  const report = await reopened.open();
  expect(report.repaired).toEqual([
    { key: volume.key, outcome: 'failed', message: expect.stringMatching(/not exist/) },
  ]);
  await reopened.stageVolume(volume.key, staging, MOUNT);
  expect(isMountPoint(staging)).toBe(true);
  await reopened.unstageVolume(volume.key, staging);
  expect(fs.existsSync(staging)).toBe(false); // made by the second stage, so removed by the unstage
});

it('refuses a staging path that already has a mount, recording nothing', async () => {
  const first = await createVolume('pvc-1');
  const second = await createVolume('pvc-2');
  const staging = coPath('staging');
  await backend.stageVolume(first.key, staging, MOUNT);

  await expectDriverError(backend.stageVolume(second.key, staging, MOUNT), FailureType.FailedPrecondition, /mount/);
  expect(fixture.list('staging')).toEqual([`${first.key}.json`]);
  expect(await backend.deleteVolume(second.key)).toEqual({ existed: true });
  await backend.unstageVolume(first.key, staging);
});
