/**
 * Publish and unpublish, the same for every backend: a bind mount of the staged volume (block: of its device,
 * onto a file) at the CO's target path, read-only when asked.
 */
import { DriverError, FailureType } from '../../common/failures';
import type { PublishOptions } from '../pool/backend';
import { assertCoPath, ensureDirectory, ensureFile, removeIfEmpty } from './co-paths';
import { pathExists } from '../host/files';
import { bindMount, showsVolume, topMountAt, unmountVolumeAt } from '../host/mounts';
import { establish } from './staging';
import { readStaging } from './staging-records';
import type { Attachment, VolumeAccess, VolumeRef } from './volume-access';

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
