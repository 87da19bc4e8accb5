/** The node side of dir volumes: the volume directory itself is bind mounted; there is nothing to attach. */
import { DriverError, FailureType } from '../../common/failures';
import type { AccessType } from '../pool/backend';
import { pathExists } from '../host/files';
import { bindMatcherOf, readMounts } from '../host/mounts';
import type { PoolLayout } from '../pool/pool-layout';
import type { Attachment, VolumeAccess, VolumeRef } from '../pool/staging';

export class DirAccess implements VolumeAccess {
  constructor(readonly layout: PoolLayout) {}

  /** A directory has no block device; fs_type is ignored (nothing is formatted). */
  checkAccess(volume: VolumeRef, accessType: AccessType): void {
    if (accessType === 'block') {
      throw new DriverError(
        FailureType.InvalidArgument,
        `volume ${volume.key} is a directory (dir backend): block access needs the loop backend`,
      );
    }
  }

  async attach(volume: VolumeRef): Promise<Attachment> {
    const attachment = await this.find(volume);
    if (!attachment) {
      throw new DriverError(FailureType.FailedPrecondition, `${this.layout.volumeDir(volume.key)} is missing`);
    }
    return attachment;
  }

  async find(volume: VolumeRef): Promise<Attachment | undefined> {
    const dir = this.layout.volumeDir(volume.key);
    if (!(await pathExists(dir))) return undefined;
    const matchers = [await bindMatcherOf(dir, await readMounts())];
    return { mount: { kind: 'bind', source: dir }, matchers, fresh: false };
  }

  async detach(): Promise<void> {}
}
