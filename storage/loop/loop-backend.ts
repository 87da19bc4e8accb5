/**
 * The loop backend: each volume is a preallocated image file in the pool (real capacity: the reservation is
 * over file sizes, and the filesystem holding the pool must have the space), attached as a loop device when it
 * is staged and detached when it is unstaged or deleted. Mount volumes are formatted at create (ext4, or xfs),
 * block volumes are handed over raw.
 */
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import type { CreateVolumeSpec, OpenReport } from '../pool/backend';
import { LOOP_FS_TYPES, assertLoopSize, growFilesystem, loopFsType, makeFilesystem } from './filesystems';
import { assertFreeSpace, preallocate } from './image-files';
import { cloneImage, copyImage } from '../host/copy';
import { runTool } from '../host/tools';
import { LoopAccess } from './loop-access';
import { attachedDevices, detachDevices, loopAttachments, refreshDevice } from './loop-devices';
import { isMountOf, realPathIfExists } from '../host/mounts';
import { PoolBackend } from '../pool/pool-backend';
import type { PoolBackendOptions } from '../pool/pool-backend';
import { isVolumeKey } from '../pool/pool-layout';
import { nodeVolumes } from '../node/node-volumes';
import { readStaging } from '../node/staging-records';
import type { VolumeShape } from '../pool/volume-compat';
import { removeVolumeDir } from '../pool/volume-dirs';
import type { CopyOrigin } from '../pool/volume-origin';
import type { StoredRecord } from '../pool/volume-records';

export type LoopBackendOptions = PoolBackendOptions;

/** The loop driver sizes devices in 512-byte sectors; the file is rounded up so the device is never short. */
const SECTOR = 512;

export class LoopBackend extends PoolBackend {
  readonly kind = 'loop';
  readonly capabilities = { accessTypes: ['mount', 'block'], fsTypes: LOOP_FS_TYPES } as const;
  private readonly access = new LoopAccess(this.layout);
  protected readonly node = nodeVolumes(this.access);

  protected shapeOf(spec: CreateVolumeSpec): VolumeShape {
    const accessType = spec.accessType ?? 'mount';
    if (accessType !== 'mount' && accessType !== 'block') {
      throw new DriverError(FailureType.InvalidArgument, `access type ${String(accessType)} is not mount or block`);
    }
    const fsType = accessType === 'mount' ? loopFsType(spec.fsType) : undefined;
    assertLoopSize(spec.capacityBytes, accessType, fsType);
    return fsType === undefined ? { accessType } : { accessType, fsType };
  }

  protected dataPath(key: string): string {
    return this.layout.volumeImage(key);
  }

  protected override allocatedBytes(capacityBytes: number): number {
    return Math.ceil(capacityBytes / SECTOR) * SECTOR;
  }

  protected override async checkSpace(bytes: number, what: string): Promise<void> {
    await assertFreeSpace(this.layout.volumesDir, bytes, what);
  }

  /**
   * A restore or clone copies the source image (holes kept), then preallocates it to the volume's size: the copy's
   * holes get real blocks, as every loop volume has, and a larger volume gets its new tail. An ext4 filesystem is
   * grown to the device when the volume is staged (loop-access.ts); xfs only through NodeExpandVolume.
   */
  protected async allocate(record: StoredRecord, origin?: CopyOrigin): Promise<void> {
    const image = this.layout.volumeImage(record.key);
    if (origin) {
      await (origin.volume ? this.copyVolumeImage(origin.volume, image) : copyImage(origin.path, image));
      await preallocate(image, this.allocatedBytes(record.capacityBytes));
      return;
    }
    await preallocate(image, this.allocatedBytes(record.capacityBytes));
    if (record.accessType !== 'block') await makeFilesystem(loopFsType(record.fsType), image);
  }

  protected snapshotDataPath(key: string): string {
    return this.layout.snapshotImage(key);
  }

  protected copyToSnapshot(source: StoredRecord, target: string): Promise<void> {
    return this.copyVolumeImage(source, target);
  }

  /**
   * Copies a volume's image. When the volume is staged its filesystem is mounted and written to: the copy, made
   * block by block while writes land, would mix old and new blocks into an image no fsck can trust. fsfreeze
   * flushes the filesystem to the image and holds every writer until the thaw, so the copy is of a clean, frozen
   * filesystem (reflink makes that pause short where the pool's filesystem has it). A volume staged for raw block
   * access has no filesystem the node can freeze (whatever is on it is the workload's): it is copied only by one
   * reflink, which takes the image at one instant, as a power cut would leave it (crash-consistent), and refused on
   * a pool without reflinks, where a copy made while the workload writes would be torn.
   */
  private async copyVolumeImage(source: StoredRecord, target: string): Promise<void> {
    const image = this.layout.volumeImage(source.key);
    const staging = await readStaging(this.layout, source.key);
    if (!staging) return copyImage(image, target);
    if (staging.accessType === 'block') {
      if (await cloneImage(image, target)) return;
      throw new DriverError(
        FailureType.FailedPrecondition,
        `volume ${source.key} is staged for raw block access at ${staging.stagingPath}, and pool ` +
          `${this.layout.root}'s filesystem has no reflinks (XFS with reflink=1 or btrfs have them): without one ` +
          'the node cannot take a consistent copy of a device in use; unstage it (stop the pods using it) and try again',
      );
    }
    await runTool('fsfreeze', ['--freeze', staging.stagingPath]);
    try {
      await copyImage(image, target);
    } finally {
      await runTool('fsfreeze', ['--unfreeze', staging.stagingPath]);
    }
  }

  /** A device still attached would keep the deleted file's blocks (and the data) alive: detach first. */
  protected async release(key: string): Promise<void> {
    await detachDevices(this.layout.volumeImage(key));
    await removeVolumeDir(this.layout, key);
  }

  protected async grow(record: StoredRecord, capacityBytes: number): Promise<void> {
    const image = this.layout.volumeImage(record.key);
    await preallocate(image, this.allocatedBytes(capacityBytes));
    for (const device of await attachedDevices(image)) await refreshDevice(device);
  }

  protected needsNodeExpansion(record: StoredRecord): boolean {
    return record.accessType !== 'block';
  }

  protected async growFilesystem(record: StoredRecord, volumePath: string): Promise<number> {
    const attachment = await this.access.find(record);
    if (!attachment?.device) {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `volume ${record.key} is not staged on this node; stage it before expanding it`,
      );
    }
    if (!(await isMountOf(volumePath, attachment.matchers))) {
      throw new DriverError(FailureType.NotFound, `${volumePath} is not a mount of volume ${record.key}`);
    }
    await refreshDevice(attachment.device);
    if (record.accessType !== 'block') {
      // The staging mount is read-write even when volumePath is a read-only publish (xfs_growfs needs that).
      const staging = await readStaging(this.layout, record.key);
      const mountPoint = staging?.accessType === 'mount' ? staging.stagingPath : volumePath;
      await growFilesystem(loopFsType(record.fsType), attachment.device, mountPoint);
    }
    return record.capacityBytes;
  }

  /** Devices attached to images of volumes that are not staged (and not mounted anywhere) are detached. */
  protected override async sweep(): Promise<OpenReport['repaired']> {
    const repaired: OpenReport['repaired'] = [];
    for (const { device, file } of await loopAttachments()) {
      const key = path.basename(path.dirname(file));
      if (!isVolumeKey(key) || (await realPathIfExists(this.layout.volumeImage(key))) !== file) continue;
      try {
        await this.node.assertNotInUse({ key });
      } catch {
        continue; // staged, or in use by someone: not a leftover
      }
      await detachDevices(this.layout.volumeImage(key));
      repaired.push({ key, outcome: 'detached', message: `${device} was attached without being staged` });
    }
    return repaired;
  }
}
