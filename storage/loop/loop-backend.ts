/**
 * The loop backend: each volume is a preallocated image file in the pool (real capacity: the reservation is
 * over file sizes, and the filesystem holding the pool must have the space), attached as a loop device when it
 * is staged and detached when it is unstaged or deleted. Mount volumes are formatted at create (ext4, or xfs),
 * block volumes are handed over raw.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import type { CreateVolumeSpec, OpenReport } from '../pool/backend';
import { LOOP_FS_TYPES, assertLoopSize, growFilesystem, loopFsType, makeFilesystem } from './filesystems';
import { assertFreeSpace, preallocate } from './image-files';
import { cloneImage, copyImage } from '../host/tools';
import { LoopAccess } from './loop-access';
import { attachedDevices, detachDevices, loopAttachments, refreshDevice } from './loop-devices';
import {
  freezeFilesystem,
  isMountOf,
  majorMinorOf,
  readMounts,
  realPathIfExists,
  thawFilesystem,
} from '../host/mounts';
import { currentBootId, removeFreeze, writeFreeze } from '../pool/journal';
import type { Intent } from '../pool/journal';
import { PoolBackend } from '../pool/pool-backend';
import type { PoolBackendOptions } from '../pool/pool-backend';
import { isVolumeKey } from '../pool/pool-layout';
import { assertNotInUse, readStaging } from '../pool/staging';
import { removeTree } from '../host/files';
import type { CopyOrigin } from '../pool/volumes';
import type { StoredRecord, VolumeShape } from '../pool/records';

export type LoopBackendOptions = PoolBackendOptions;

/** The loop driver sizes devices in 512-byte sectors; the file is rounded up so the device is never short. */
const SECTOR = 512;

export class LoopBackend extends PoolBackend {
  readonly kind = 'loop';
  readonly capabilities = { accessTypes: ['mount', 'block'], fsTypes: LOOP_FS_TYPES } as const;
  readonly access = new LoopAccess(this.layout);

  shapeOf(spec: CreateVolumeSpec): VolumeShape {
    const accessType = spec.accessType ?? 'mount';
    if (accessType !== 'mount' && accessType !== 'block') {
      throw new DriverError(FailureType.InvalidArgument, `access type ${String(accessType)} is not mount or block`);
    }
    const fsType = accessType === 'mount' ? loopFsType(spec.fsType) : undefined;
    assertLoopSize(spec.capacityBytes, accessType, fsType);
    return fsType === undefined ? { accessType } : { accessType, fsType };
  }

  dataPath(key: string): string {
    return this.layout.volumeImage(key);
  }

  override allocatedBytes(capacityBytes: number): number {
    return Math.ceil(capacityBytes / SECTOR) * SECTOR;
  }

  override async checkSpace(bytes: number, what: string): Promise<void> {
    await assertFreeSpace(this.layout.volumesDir, bytes, what);
  }

  /**
   * A restore or clone is filled by copyIn, without the pool held; an empty volume is preallocated and formatted
   * here.
   */
  async allocate(record: StoredRecord, origin?: CopyOrigin): Promise<void> {
    if (origin) return;
    const image = this.layout.volumeImage(record.key);
    await preallocate(image, this.allocatedBytes(record.capacityBytes));
    if (record.accessType !== 'block') await makeFilesystem(loopFsType(record.fsType), image);
  }

  /**
   * A restore or clone copies the source image (holes kept), then preallocates it to the volume's size: the copy's
   * holes get real blocks, as every loop volume has, and a larger volume gets its new tail. An ext4 filesystem is
   * grown to the device when the volume is staged (loop-access.ts); xfs only through NodeExpandVolume.
   */
  async copyIn(record: StoredRecord, origin: CopyOrigin, budgetMs: number): Promise<void> {
    const image = this.layout.volumeImage(record.key);
    await (origin.volume
      ? this.copyVolumeImage(origin.volume, image, budgetMs)
      : copyImage(origin.path, image, budgetMs));
    await preallocate(image, this.allocatedBytes(record.capacityBytes));
  }

  snapshotDataPath(key: string): string {
    return this.layout.snapshotImage(key);
  }

  copyToSnapshot(source: StoredRecord, target: string, budgetMs: number): Promise<void> {
    return this.copyVolumeImage(source, target, budgetMs);
  }

  /**
   * Copies a volume's image. While its filesystem is mounted it is written to: the copy, made block by block while
   * writes land, would mix old and new blocks into an image no fsck can trust. fsfreeze flushes the filesystem to
   * the image and holds every writer until the thaw, so the copy is of a clean, frozen filesystem (reflink makes that
   * pause short where the pool's filesystem has it). The freeze is journaled first (frozen/ in the pool), so a thaw
   * a killed agent never ran is run when the pool opens again, or before the next call changes it.
   *
   * Only the volume's own filesystem is frozen, through a mount point mountinfo shows it at (fsfreeze freezes
   * whatever filesystem holds the path it is given: a staging path whose mount is gone is a directory of the node's
   * /var, where the pool lies too, and the copy would wait for ever on its own frozen target). A filesystem mounted
   * nowhere is copied as it is: nothing writes to it, and its last unmount left it clean.
   *
   * A volume staged for raw block access has no filesystem the node can freeze (whatever is on it is the
   * workload's): it is copied only by one reflink, which takes the image at one instant, as a power cut would leave
   * it (crash-consistent), and refused on a pool without reflinks, where a copy made while the workload writes
   * would be torn.
   */
  private async copyVolumeImage(source: StoredRecord, target: string, budgetMs: number): Promise<void> {
    const image = this.layout.volumeImage(source.key);
    const staging = await readStaging(this.layout, source.key);
    if (staging?.accessType === 'block') {
      if (await cloneImage(image, target, budgetMs)) return;
      throw new DriverError(
        FailureType.FailedPrecondition,
        `volume ${source.key} is staged for raw block access at ${staging.stagingPath}, and pool ` +
          `${this.layout.root}'s filesystem has no reflinks (XFS with reflink=1 or btrfs have them): without one ` +
          'the node cannot take a consistent copy of a device in use; unstage it (stop the pods using it) and try again',
      );
    }
    const mounted =
      source.accessType === 'block' ? undefined : await this.mountedFilesystem(source, staging?.stagingPath);
    if (!mounted) return copyImage(image, target, budgetMs);
    const { mountPoint, majorMinor } = mounted;
    await writeFreeze(this.layout, {
      key: source.key,
      mountPoint,
      majorMinor,
      bootId: await currentBootId(),
      at: new Date().toISOString(),
    });
    try {
      await freezeFilesystem(mountPoint);
    } catch (error) {
      await removeFreeze(this.layout, source.key);
      throw error;
    }
    try {
      await copyImage(image, target, budgetMs);
    } finally {
      // Should the thaw fail, the record stays: the next call or open() thaws it (journal.ts).
      await thawFilesystem(mountPoint);
      await removeFreeze(this.layout, source.key);
    }
  }

  /**
   * Where the volume's filesystem is mounted, to freeze it through (the staging path first): a mount point whose
   * top mount, and whose own path, are of the volume's device. Undefined when it is mounted nowhere.
   */
  private async mountedFilesystem(
    source: StoredRecord,
    stagingPath: string | undefined,
  ): Promise<{ mountPoint: string; majorMinor: string } | undefined> {
    const device = (await this.access.find(source))?.device;
    if (!device) return undefined; // not attached: not mounted
    const majorMinor = majorMinorOf((await fs.stat(device, { bigint: true })).rdev);
    const mounts = await readMounts();
    const staged = stagingPath === undefined ? undefined : await realPathIfExists(stagingPath);
    const mountPoints = [
      ...new Set(mounts.filter((entry) => entry.majorMinor === majorMinor).map((entry) => entry.mountPoint)),
    ].sort((a, b) => Number(b === staged) - Number(a === staged));
    if (mountPoints.length === 0) return undefined;
    const poolDevice = majorMinorOf((await fs.stat(this.layout.root, { bigint: true })).dev);
    for (const mountPoint of mountPoints) {
      const top = mounts.filter((entry) => entry.mountPoint === mountPoint).pop();
      const shown = await fs.stat(mountPoint, { bigint: true }).then(
        (stat) => majorMinorOf(stat.dev),
        () => undefined,
      );
      if (top?.majorMinor !== majorMinor || shown !== majorMinor) continue; // covered by another mount
      if (shown === poolDevice) {
        throw new DriverError(
          FailureType.Internal,
          `refusing to freeze ${mountPoint}: it holds pool ${this.layout.root}`,
        );
      }
      return { mountPoint, majorMinor };
    }
    // Mounted, so maybe written to, but only under other mounts: no path reaches it to freeze it.
    throw new DriverError(
      FailureType.Aborted,
      `volume ${source.key}'s filesystem is mounted at ${mountPoints.join(', ')}, each covered by another mount: ` +
        'the node cannot freeze it for a consistent copy; try again once those mounts are gone',
    );
  }

  /** A device still attached would keep the deleted file's blocks (and the data) alive: detach first. */
  async release({ key }: Intent): Promise<void> {
    await detachDevices(this.layout.volumeImage(key));
    await removeTree(this.layout.volumeDir(key));
  }

  async grow(record: StoredRecord, capacityBytes: number): Promise<void> {
    const image = this.layout.volumeImage(record.key);
    await preallocate(image, this.allocatedBytes(capacityBytes));
    for (const device of await attachedDevices(image)) await refreshDevice(device);
  }

  needsNodeExpansion(record: StoredRecord): boolean {
    return record.accessType !== 'block';
  }

  async growFilesystem(record: StoredRecord, volumePath: string): Promise<number> {
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
  override async sweep(): Promise<OpenReport['repaired']> {
    const repaired: OpenReport['repaired'] = [];
    for (const { device, file } of await loopAttachments()) {
      const key = path.basename(path.dirname(file));
      if (!isVolumeKey(key) || (await realPathIfExists(this.layout.volumeImage(key))) !== file) continue;
      try {
        await assertNotInUse(this.access, { key });
      } catch {
        continue; // staged, or in use by someone: not a leftover
      }
      await detachDevices(this.layout.volumeImage(key));
      repaired.push({ key, outcome: 'detached', message: `${device} was attached without being staged` });
    }
    return repaired;
  }
}
