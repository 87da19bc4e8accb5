/**
 * The loop backend: each volume is a preallocated image file in the pool (real capacity: the reservation is
 * over file sizes, and the filesystem holding the pool must have the space), attached as a loop device when it
 * is staged and detached when it is unstaged or deleted. Mount volumes are formatted at create (ext4, or xfs),
 * block volumes are handed over raw.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import type { AccessType, CreateVolumeSpec, OpenReport } from '../pool/backend';
import { pathExists, removeTree } from '../host/files';
import {
  bindMatcherOf,
  deviceBytes,
  freezeFilesystem,
  isMountOf,
  majorMinorOf,
  readMounts,
  realPathIfExists,
  showsVolume,
  thawFilesystem,
} from '../host/mounts';
import { cloneImage, copyImage } from '../host/tools';
import { currentBootId, removeFreeze, writeFreeze } from '../pool/journal';
import type { Intent } from '../pool/journal';
import { PoolBackend } from '../pool/pool-backend';
import type { PoolBackendOptions } from '../pool/pool-backend';
import { isVolumeKey } from '../pool/pool-layout';
import type { PoolLayout } from '../pool/pool-layout';
import type { StoredRecord, VolumeShape } from '../pool/records';
import { assertNotInUse, readStaging } from '../pool/staging';
import type { Attachment, VolumeAccess, VolumeRef } from '../pool/staging';
import type { CopyOrigin } from '../pool/volumes';
import { LOOP_FS_TYPES } from '../../common/backend-kinds';
import { assertLoopSize, growExt4IfSmaller, growFilesystem, loopFsType, makeFilesystem } from './filesystems';
import {
  assertFreeSpace,
  attachDevice,
  attachedDevices,
  detachDevices,
  devicesByKind,
  devicesOfKind,
  loopAttachments,
  preallocate,
  refreshDevice,
} from './loop-devices';

export type LoopBackendOptions = PoolBackendOptions;

/** A volume's filesystem at the mount point it is frozen through. */
interface Frozen {
  key: string;
  mountPoint: string;
  majorMinor: string;
}

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
   * grown to the device when the volume is staged (LoopAccess.attach); xfs only through NodeExpandVolume.
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

  copyStagedToSnapshot(staged: string, target: string, budgetMs: number): Promise<void> {
    return copyImage(staged, target, budgetMs);
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
   * A group snapshot: every member's filesystem that is mounted frozen (each through the same guarded choice of mount
   * point as a single copy, mountedFilesystem, and journaled first), then each image copied, then all thawed, in
   * that order and in one call, so the copies are of one instant: no write lands on any member between the first
   * copy and the last. A member mounted nowhere is not written to meanwhile. A member staged for raw block access
   * cannot be frozen: with reflinks, one such member is taken by a single reflink inside the others' freeze (the
   * instant of its FICLONE is then the group's); two would be taken at two instants, so the group is refused, and on a
   * pool without reflinks so is any such member (a block copy of a device in use is torn). Every refusal is
   * FailedPrecondition, made before anything is frozen or copied (but for the reflink probe, which copies nothing).
   */
  async copyGroupToSnapshots(members: { source: StoredRecord; target: string }[], budgetMs: number): Promise<void> {
    const deadline = Date.now() + budgetMs;
    const left = () => Math.max(1, deadline - Date.now());
    const plans: { source: StoredRecord; target: string; image: string; rawInUse: boolean; mounted?: Frozen }[] = [];
    for (const { source, target } of members) {
      const staging = await readStaging(this.layout, source.key);
      const rawInUse = staging?.accessType === 'block';
      const mounted =
        rawInUse || source.accessType === 'block'
          ? undefined
          : await this.mountedFilesystem(source, staging?.stagingPath);
      plans.push({ source, target, image: this.layout.volumeImage(source.key), rawInUse, mounted });
    }
    const raw = plans.filter((plan) => plan.rawInUse).map((plan) => plan.source.key);
    if (raw.length > 1) {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `volumes ${raw.join(', ')} are staged for raw block access: the node cannot freeze them, so their copies ` +
          'would be of different instants; a group snapshot takes at most one volume in use as a raw block device ' +
          '(unstage the others, or snapshot them apart)',
      );
    }
    const frozen: Frozen[] = [];
    let failure: { error: unknown } | undefined;
    try {
      for (const plan of plans) {
        if (!plan.mounted) continue;
        await this.freeze(plan.source.key, plan.mounted);
        frozen.push(plan.mounted);
      }
      let reflinks = true;
      for (const plan of plans) {
        if (reflinks && (await cloneImage(plan.image, plan.target, left()))) continue;
        reflinks = false;
        if (raw.length > 0) {
          throw new DriverError(
            FailureType.FailedPrecondition,
            `volume ${raw[0]} is staged for raw block access, and pool ${this.layout.root}'s filesystem has no ` +
              'reflinks (XFS with reflink=1 or btrfs have them): without one the node cannot take a consistent copy ' +
              'of a device in use; unstage it (stop the pods using it) and try again',
          );
        }
        await copyImage(plan.image, plan.target, left());
      }
    } catch (error) {
      failure = { error };
    }
    // Every member is thawed, whatever failed (the thaw of one failing too); a failed thaw leaves its record for the
    // next call or open() (journal.ts).
    const thawFailures: unknown[] = [];
    for (const entry of frozen.reverse()) {
      try {
        await thawFilesystem(entry.mountPoint);
        await removeFreeze(this.layout, entry.key);
      } catch (error) {
        thawFailures.push(error);
      }
    }
    if (failure) throw failure.error;
    if (thawFailures.length > 0) throw thawFailures[0];
  }

  /** Journals the freeze, then freezes; a freeze that fails leaves no record. */
  private async freeze(key: string, mounted: Frozen): Promise<void> {
    await writeFreeze(this.layout, {
      key,
      mountPoint: mounted.mountPoint,
      majorMinor: mounted.majorMinor,
      bootId: await currentBootId(),
      at: new Date().toISOString(),
    });
    try {
      await freezeFilesystem(mounted.mountPoint);
    } catch (error) {
      await removeFreeze(this.layout, key);
      throw error;
    }
  }

  /**
   * Where the volume's filesystem is mounted, to freeze it through (the staging path first): a mount point whose
   * top mount, and whose own path, are of the volume's device. Undefined when it is mounted nowhere.
   */
  private async mountedFilesystem(source: StoredRecord, stagingPath: string | undefined): Promise<Frozen | undefined> {
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
      return { key: source.key, mountPoint, majorMinor };
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

/**
 * The node side of loop volumes: the image is attached as a loop device (found again with `losetup -j`, so a
 * restarted agent adopts what is there); mount volumes mount its filesystem, block volumes hand the device over.
 */
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
