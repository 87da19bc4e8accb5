/**
 * The node side of loop volumes: the image is attached as a loop device (found again with `losetup -j`, so a
 * restarted agent adopts what is there); mount volumes mount its filesystem, block volumes hand the device over.
 */
import { promises as fs } from 'node:fs';
import { DriverError, FailureType } from '../../common/failures';
import type { AccessType } from '../pool/backend';
import { growExt4IfSmaller, growFilesystem, loopFsType } from './filesystems';
import { deviceBytes, bindMatcherOf, majorMinorOf, readMounts, showsVolume } from '../host/mounts';
import { pathExists } from '../host/files';
import { attachDevice, detachDevices, devicesByKind, devicesOfKind } from './loop-devices';
import type { PoolLayout } from '../pool/pool-layout';
import type { Attachment, VolumeAccess, VolumeRef } from '../pool/staging';

export class LoopAccess implements VolumeAccess {
  constructor(readonly layout: PoolLayout) {}

  checkAccess(volume: VolumeRef, accessType: AccessType, fsType: string): void {
    const own = volume.accessType ?? 'mount';
    if (own !== accessType) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `volume ${volume.key} was created for ${own} access; it cannot be used for ${accessType} access`,
      );
    }
    if (accessType === 'mount' && fsType !== '' && fsType !== loopFsType(volume.fsType)) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `volume ${volume.key} holds ${loopFsType(volume.fsType)}, not the requested fs_type ${fsType}`,
      );
    }
  }

  async attach(volume: VolumeRef): Promise<Attachment> {
    const image = this.layout.volumeImage(volume.key);
    if (!(await pathExists(image))) {
      throw new DriverError(FailureType.FailedPrecondition, `the image of volume ${volume.key} (${image}) is missing`);
    }
    const { device, fresh } = await attachDevice(image);
    const readers = await devicesOfKind(image, true);
    const attachment = await this.describe(volume, device, fresh, readers);
    if (attachment.mount?.kind === 'filesystem' && attachment.mount.fsType === 'ext4') {
      // Expanded while unstaged: grow it now, before it is mounted (online growth needs CAP_SYS_RESOURCE).
      const mounted = (await readMounts()).some((entry) => showsVolume(entry, attachment.matchers));
      if (!mounted) await growExt4IfSmaller(device, await deviceBytes(device));
    }
    return attachment;
  }

  async find(volume: VolumeRef): Promise<Attachment | undefined> {
    const { readWrite, readOnly } = await devicesByKind(this.layout.volumeImage(volume.key));
    const [device] = readWrite;
    return device === undefined ? undefined : this.describe(volume, device, false, readOnly);
  }

  /**
   * xfs grows only while mounted: a restore larger than its snapshot (or a volume expanded while unstaged) reaches
   * its size here; ext4 was grown in attach, before the mount. A filesystem already at its device's size is left so.
   */
  async afterMount(attachment: Attachment, mountPoint: string): Promise<void> {
    const { mount } = attachment;
    if (mount?.kind === 'filesystem' && mount.fsType === 'xfs') await growFilesystem('xfs', mount.device, mountPoint);
  }

  /** A read-only loop device over the same image, for a read-only raw block publish. */
  async readOnlyDevice(volume: VolumeRef): Promise<string> {
    return (await attachDevice(this.layout.volumeImage(volume.key), true)).device;
  }

  /** Detaches the read-only devices no publish binds any more (after an unpublish). */
  async releaseUnused(volume: VolumeRef): Promise<void> {
    const mounts = await readMounts();
    const image = this.layout.volumeImage(volume.key);
    const unused: string[] = [];
    for (const device of await devicesOfKind(image, true)) {
      const matcher = await bindMatcherOf(device, mounts);
      if (!mounts.some((entry) => showsVolume(entry, [matcher]))) unused.push(device);
    }
    if (unused.length > 0) await detachDevices(image, unused);
  }

  async detach(volume: VolumeRef): Promise<void> {
    await detachDevices(this.layout.volumeImage(volume.key));
  }

  /** Its filesystem's mounts (any bind of it included) and bind mounts of its device nodes (readers' too). */
  private async describe(volume: VolumeRef, device: string, fresh: boolean, readers: string[]): Promise<Attachment> {
    const filesystem = { majorMinor: majorMinorOf((await fs.stat(device, { bigint: true })).rdev) };
    const mounts = await readMounts();
    const matchers = [filesystem, ...(await Promise.all([device, ...readers].map((d) => bindMatcherOf(d, mounts))))];
    if (volume.accessType === 'block') return { device, matchers, fresh };
    return { mount: { kind: 'filesystem', device, fsType: loopFsType(volume.fsType) }, device, matchers, fresh };
  }
}
