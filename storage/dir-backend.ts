/**
 * The dir backend: one directory per volume inside a pool directory. Capacity is a reservation (the sum of the
 * volumes' sizes must fit the pool's), not a quota: nothing stops a user writing more than a volume's size.
 * Staging bind mounts the directory; there is no block access and nothing to format or grow.
 */
import { DriverError, FailureType } from '../common/failures';
import type { CreateVolumeSpec } from './backend';
import { DirAccess } from './dir-access';
import { isMountOf } from './mounts';
import { PoolBackend } from './pool-backend';
import type { PoolBackendOptions } from './pool-backend';
import type { VolumeShape } from './volume-compat';
import { removeVolumeDir } from './volume-dirs';
import type { StoredRecord } from './volume-records';

export type DirBackendOptions = PoolBackendOptions;

export class DirBackend extends PoolBackend {
  readonly kind = 'dir';
  readonly capabilities = { accessTypes: ['mount'], fsTypes: [] } as const;
  protected readonly access = new DirAccess(this.layout);

  protected shapeOf(spec: CreateVolumeSpec): VolumeShape {
    if (spec.accessType === 'block') {
      throw new DriverError(
        FailureType.InvalidArgument,
        'a dir volume is a directory: block access needs the loop backend',
      );
    }
    return {};
  }

  protected dataPath(key: string): string {
    return this.layout.volumeDir(key);
  }

  protected async allocate(): Promise<void> {}

  protected async release(key: string): Promise<void> {
    await removeVolumeDir(this.layout, key);
  }

  /** Only the reservation grows. */
  protected async grow(): Promise<void> {}

  protected needsNodeExpansion(): boolean {
    return false;
  }

  protected async growFilesystem(record: StoredRecord, volumePath: string): Promise<number> {
    const attachment = await this.access.find(record);
    if (!attachment || !(await isMountOf(volumePath, attachment.matchers))) {
      throw new DriverError(FailureType.NotFound, `${volumePath} is not a mount of volume ${record.key}`);
    }
    return record.capacityBytes;
  }
}
