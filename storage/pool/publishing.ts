/**
 * Publish and unpublish, the same for every backend: a bind mount of the staged volume (block: of its device,
 * onto a file) at the CO's target path, read-only when asked; and NodeGetVolumeStats, the usage seen through the
 * CO's path, with an abnormal condition when the volume's data or device is gone.
 */
import { promises as fs } from 'node:fs';
import { DriverError, FailureType } from '../../common/failures';
import type { PublishOptions, VolumeStats, VolumeUsage } from './backend';
import { pathExists } from '../host/files';
import { bindMount, deviceBytes, showsVolume, topMountAt, unmountVolumeAt } from '../host/mounts';
import { assertCoPath, ensureDirectory, ensureFile, establish, readStaging, removeIfEmpty } from './staging';
import type { Attachment, VolumeAccess, VolumeRef } from './staging';

export async function publish(
  access: VolumeAccess,
  volume: VolumeRef,
  stagingPath: string,
  targetPath: string,
  options: PublishOptions,
): Promise<void> {
  assertCoPath(stagingPath, 'staging path');
  assertCoPath(targetPath, 'target path');
  access.checkAccess(volume, options.accessType, '');
  const { key } = volume;
  const staging = await readStaging(access.layout, key);
  if (!staging || staging.stagingPath !== stagingPath) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `volume ${key} is not staged at ${stagingPath}; stage it first`,
    );
  }
  if (staging.accessType !== options.accessType) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `volume ${key} is staged for ${staging.accessType} access, not ${options.accessType}`,
    );
  }
  // Whatever went missing since it was staged (a reboot this agent has not reconciled yet) is put back first.
  const { attachment } = await establish(access, volume, staging);
  const top = await topMountAt(targetPath);
  if (top && showsVolume(top, attachment.matchers)) {
    if (top.readonly === options.readonly) return;
    const mode = top.readonly ? 'read-only' : 'read-write';
    throw new DriverError(FailureType.AlreadyExists, `volume ${key} is already published at ${targetPath} ${mode}`);
  }
  if (top) {
    throw new DriverError(FailureType.FailedPrecondition, `${targetPath} already has another mount (${top.source})`);
  }
  const source = options.accessType === 'block' ? await blockSource(access, volume, attachment, options) : stagingPath;
  if (source === undefined) throw new DriverError(FailureType.Internal, `volume ${key} has no device to publish`);
  const created =
    options.accessType === 'block'
      ? await ensureFile(targetPath, 'target path')
      : await ensureDirectory(targetPath, 'target path');
  try {
    await bindMount(source, targetPath, { readonly: options.readonly, device: options.accessType === 'block' });
  } catch (error) {
    if (created) await removeIfEmpty(targetPath).catch(() => undefined);
    throw error;
  }
}

/** The device a block publish binds: the staged one, or for a reader one the kernel keeps read-only. */
async function blockSource(
  access: VolumeAccess,
  volume: VolumeRef,
  attachment: Attachment,
  options: { readonly: boolean },
): Promise<string | undefined> {
  if (!options.readonly) return attachment.device;
  if (!access.readOnlyDevice) {
    // A read-only bind mount does not stop writes to a device node: the reader would get a writable disk.
    throw new DriverError(
      FailureType.InvalidArgument,
      `volume ${volume.key}: this backend has no read-only device for a read-only raw block publish`,
    );
  }
  return access.readOnlyDevice(volume);
}

/** Absent target: nothing to do. A mount of anything else there is left alone (FailedPrecondition). */
export async function unpublish(access: VolumeAccess, volume: VolumeRef, targetPath: string): Promise<void> {
  assertCoPath(targetPath, 'target path');
  if (!(await pathExists(targetPath))) return;
  const attachment = await access.find(volume);
  if (attachment) await unmountVolumeAt(targetPath, attachment.matchers);
  await access.releaseUnused?.(volume);
  const top = await topMountAt(targetPath);
  if (top) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `${targetPath} holds a mount that is not volume ${volume.key} (${top.source}); it is left alone`,
    );
  }
  await removeIfEmpty(targetPath);
}

/* NodeGetVolumeStats. */

/** `dataPath` is the volume's data in the pool (its directory or image file). */
export async function volumeStats(
  access: VolumeAccess,
  volume: VolumeRef,
  dataPath: string,
  volumePath: string,
): Promise<VolumeStats> {
  assertCoPath(volumePath, 'volume path');
  const { key } = volume;
  if (!(await pathExists(volumePath))) {
    throw new DriverError(FailureType.NotFound, `volume path ${volumePath} does not exist`);
  }
  if (!(await pathExists(dataPath))) {
    const usage = await filesystemUsage(volumePath).catch(() => []);
    return { usage, abnormal: true, message: `the volume's data ${dataPath} is missing from the pool` };
  }
  const attachment = await access.find(volume);
  const top = attachment && (await topMountAt(volumePath));
  if (!attachment || !top || !showsVolume(top, attachment.matchers)) {
    // Staged, yet nothing shows it: its device is gone (detached by hand). Otherwise the path is just not ours.
    const staging = await readStaging(access.layout, key);
    if (!attachment && staging) {
      const message = `volume ${key} is staged at ${staging.stagingPath} but has no device attached`;
      return { usage: [], abnormal: true, message };
    }
    throw new DriverError(FailureType.NotFound, `${volumePath} is not a mount of volume ${key}`);
  }
  const usage =
    volume.accessType === 'block' && attachment.device
      ? [{ unit: 'bytes' as const, total: await deviceBytes(attachment.device) }]
      : await filesystemUsage(volumePath);
  return { usage, abnormal: false, message: 'volume is healthy' };
}

async function filesystemUsage(volumePath: string): Promise<VolumeUsage[]> {
  const stats = await fs.statfs(volumePath);
  return [
    {
      unit: 'bytes',
      total: stats.blocks * stats.bsize,
      used: (stats.blocks - stats.bfree) * stats.bsize,
      available: stats.bavail * stats.bsize,
    },
    { unit: 'inodes', total: stats.files, used: stats.files - stats.ffree, available: stats.ffree },
  ];
}
