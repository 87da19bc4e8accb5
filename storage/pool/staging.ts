/**
 * Staging, the same for every backend: a volume is made usable on this node (attached, mounted at the CO's staging
 * path) through its backend's VolumeAccess, which says how a volume is attached and what shows it in the mount table.
 *
 * staging/<key>.json records where a volume is staged and how. It is written before anything is attached or mounted
 * and removed after everything is undone, so that whatever a crash or a reboot interrupts, the pool knows the volume
 * may be in use: deleteVolume refuses it (assertNotInUse), and open() re-establishes its device and mount.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import type { AccessType, OpenReport, StageOptions } from './backend';
import { errorCode, isNotFound, jsonFields, pathExists, readJson, removeFile, writeJsonAtomic } from '../host/files';
import type { MountEntry, MountMatcher } from '../host/mounts';
import {
  bindMount,
  mountFilesystem,
  readMounts,
  realPathIfExists,
  showsVolume,
  topMountAt,
  unmountVolumeAt,
} from '../host/mounts';
import { readKeyedFiles } from './pool-layout';
import type { PoolLayout } from './pool-layout';
import { readRecord } from './records';
import type { StoredRecord } from './records';

/* What differs between backends (dir-backend.ts, loop-backend.ts): how a volume is made usable, how its mounts look. */

/** A volume as staging sees it; a key alone (a directory left without a record) is enough to find it. */
export type VolumeRef = Pick<StoredRecord, 'key' | 'accessType' | 'fsType'>;

export interface Attachment {
  /** What stage mounts at the staging path; undefined for block volumes (nothing is mounted there). */
  mount?: { kind: 'bind'; source: string } | { kind: 'filesystem'; device: string; fsType: string };
  /** Block volumes: the device that publish binds onto the target file. */
  device?: string;
  /** Recognises every mount that shows this volume (see mounts.ts). */
  matchers: MountMatcher[];
  /** True when this call attached it (a loop device that was not there). */
  fresh: boolean;
}

export interface VolumeAccess {
  readonly layout: PoolLayout;
  /** InvalidArgument when the volume cannot be used this way (block on dir, mount of a block volume, ...). */
  checkAccess(volume: VolumeRef, accessType: AccessType, fsType: string): void;
  /** Makes the volume usable (loop: attaches a device unless one is attached); idempotent. */
  attach(volume: VolumeRef): Promise<Attachment>;
  /** The current attachment without attaching; undefined when there is none (then nothing can show it). */
  find(volume: VolumeRef): Promise<Attachment | undefined>;
  /** Undoes attach (loop: detaches every device of the image); idempotent. */
  detach(volume: VolumeRef): Promise<void>;
  /** Once its filesystem is mounted at the staging path (loop xfs: grown to its device, which only a mount allows). */
  afterMount?(attachment: Attachment, mountPoint: string): Promise<void>;
  /** Raw block only: a device the kernel keeps read-only, for a read-only publish (absent: refused). */
  readOnlyDevice?(volume: VolumeRef): Promise<string>;
  /** After an unpublish: lets go of read-only devices nothing binds any more. */
  releaseUnused?(volume: VolumeRef): Promise<void>;
}

/* The staging record. */

export interface StagingRecord {
  key: string;
  /** Absolute, as the CO gave it. */
  stagingPath: string;
  accessType: AccessType;
  /** Loop mount volumes: the filesystem mounted there. */
  fsType?: string;
  mountFlags: string[];
  /** True when stage made the directory: unstage then removes it (if empty); otherwise it is the CO's. */
  createdDir: boolean;
  /** ISO 8601. */
  stagedAt: string;
}

function parseStaging(value: unknown, key: string): StagingRecord | undefined {
  const record = jsonFields(value);
  const { stagingPath, accessType, fsType, mountFlags, createdDir, stagedAt } = record;
  if (
    record.key !== key ||
    typeof stagingPath !== 'string' ||
    !path.isAbsolute(stagingPath) ||
    (accessType !== 'mount' && accessType !== 'block') ||
    (fsType !== undefined && typeof fsType !== 'string') ||
    !Array.isArray(mountFlags) ||
    !mountFlags.every((flag) => typeof flag === 'string') ||
    typeof createdDir !== 'boolean' ||
    typeof stagedAt !== 'string'
  ) {
    return undefined;
  }
  return {
    key,
    stagingPath,
    accessType,
    ...(fsType === undefined ? {} : { fsType }),
    mountFlags,
    createdDir,
    stagedAt,
  };
}

export async function readStaging(layout: PoolLayout, key: string): Promise<StagingRecord | undefined> {
  const file = layout.stagingFile(key);
  const value = await readJson(file);
  if (value === undefined) return undefined;
  const staging = parseStaging(value, key);
  if (!staging) throw new DriverError(FailureType.Internal, `${file} is not a staging record for key ${key}`);
  return staging;
}

export async function writeStaging(layout: PoolLayout, staging: StagingRecord): Promise<void> {
  await writeJsonAtomic(layout.stagingFile(staging.key), staging);
}

export async function removeStaging(layout: PoolLayout, key: string): Promise<void> {
  await removeFile(layout.stagingFile(key));
}

/** Every readable staging record, sorted by key; anything else in staging/ is a stray (left alone). */
export async function listStaging(layout: PoolLayout): Promise<{ stagings: StagingRecord[]; strays: string[] }> {
  const read = (key: string) => readStaging(layout, key).catch(unreadable);
  const { entries, strays } = await readKeyedFiles(layout.stagingDir, read);
  return { stagings: entries, strays };
}

/** A staging file nobody can read is reported as a stray, not allowed to stop the pool from opening. */
function unreadable(error: unknown): undefined {
  if (error instanceof DriverError) return undefined;
  throw error;
}

/* Stage, unstage, and whether a volume is in use. */

type Repaired = OpenReport['repaired'][number];

export async function stage(access: VolumeAccess, volume: VolumeRef, stagingPath: string, options: StageOptions) {
  assertCoPath(stagingPath, 'staging path');
  access.checkAccess(volume, options.accessType, options.fsType);
  const recorded = await readStaging(access.layout, volume.key);
  if (recorded) assertSameStaging(recorded, stagingPath, options);
  else if (options.accessType === 'mount') {
    // Checked before the record is written: a refused stage must leave the volume unstaged.
    const top = await topMountAt(stagingPath);
    if (top)
      throw new DriverError(FailureType.FailedPrecondition, `${stagingPath} already has a mount (${top.source})`);
  }
  // Made when missing, even for a recorded staging: kubelet's directories may not survive a reboot.
  const makeDir = options.accessType === 'mount' || !(await pathExists(stagingPath));
  const createdDir = makeDir && (await ensureDirectory(stagingPath, 'staging path'));
  let staging = recorded;
  if (!staging || (createdDir && !staging.createdDir)) {
    staging = {
      key: volume.key,
      stagingPath,
      accessType: options.accessType,
      ...(volume.fsType === undefined ? {} : { fsType: volume.fsType }),
      mountFlags: [...options.mountFlags],
      stagedAt: new Date().toISOString(),
      ...staging,
      createdDir: staging?.createdDir || createdDir,
    };
    await writeStaging(access.layout, staging);
  }
  await establish(access, volume, staging);
}

/** The same stage again is a no-op; at another path FailedPrecondition, with another capability AlreadyExists. */
function assertSameStaging(staging: StagingRecord, stagingPath: string, options: StageOptions): void {
  if (staging.stagingPath !== stagingPath) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `volume ${staging.key} is already staged at ${staging.stagingPath}`,
    );
  }
  if (staging.accessType !== options.accessType || !sameFlags(staging.mountFlags, options.mountFlags)) {
    throw new DriverError(
      FailureType.AlreadyExists,
      `volume ${staging.key} is already staged at ${stagingPath} for ${describe(staging)}, not ${describe(options)}`,
    );
  }
}

/** Attaches and mounts as the staging record says; `changed` when anything was missing. Idempotent. */
export async function establish(
  access: VolumeAccess,
  volume: VolumeRef,
  staging: StagingRecord,
): Promise<{ attachment: Attachment; changed: boolean }> {
  const attachment = await access.attach(volume);
  const { mount } = attachment;
  if (!mount) return { attachment, changed: attachment.fresh };
  const top = await topMountAt(staging.stagingPath);
  if (top && showsVolume(top, attachment.matchers)) return { attachment, changed: attachment.fresh };
  if (top) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `${staging.stagingPath} already has another mount (${top.source}); it cannot stage volume ${volume.key}`,
    );
  }
  if (!(await pathExists(staging.stagingPath))) {
    throw new DriverError(FailureType.FailedPrecondition, `staging path ${staging.stagingPath} does not exist`);
  }
  // A dir volume's mount flags (csi/mount-options.ts allows only per-mount ones) go on its bind mount.
  if (mount.kind === 'bind')
    await bindMount(mount.source, staging.stagingPath, { readonly: false, flags: staging.mountFlags });
  else {
    await mountFilesystem(mount.device, staging.stagingPath, mount.fsType, staging.mountFlags);
    try {
      await access.afterMount?.(attachment, staging.stagingPath);
    } catch (error) {
      // Not left mounted: a retried stage would find the mount, answer OK and never do what failed here.
      await unmountVolumeAt(staging.stagingPath, attachment.matchers).catch(() => undefined);
      throw error;
    }
  }
  return { attachment, changed: true };
}

export async function unstage(access: VolumeAccess, volume: VolumeRef, stagingPath: string): Promise<void> {
  assertCoPath(stagingPath, 'staging path');
  const staging = await readStaging(access.layout, volume.key);
  if (!staging || staging.stagingPath !== stagingPath) return;
  const attachment = await access.find(volume);
  if (attachment) {
    const real = await realPathIfExists(stagingPath);
    const elsewhere = (await mountsShowing(attachment)).filter((entry) => entry.mountPoint !== real);
    if (elsewhere.length > 0) {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `volume ${volume.key} is still published at ${mountPoints(elsewhere)}; unpublish it first`,
      );
    }
    await unmountVolumeAt(stagingPath, attachment.matchers);
  }
  await access.detach(volume);
  if (staging.createdDir) await removeIfEmpty(stagingPath);
  await removeStaging(access.layout, volume.key);
}

/** FailedPrecondition while the volume is staged or mounted anywhere: deleting it then would lose data. */
export async function assertNotInUse(access: VolumeAccess, volume: VolumeRef): Promise<void> {
  const staging = await readStaging(access.layout, volume.key);
  if (staging) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `volume ${volume.key} is staged at ${staging.stagingPath}; unstage it first`,
    );
  }
  const mounted = await mountsShowing(await access.find(volume));
  if (mounted.length > 0) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `volume ${volume.key} is mounted at ${mountPoints(mounted)}; unmount it first`,
    );
  }
}

/** At open: re-establishes every recorded staging (after a reboot nothing is attached or mounted). */
export async function restageAll(access: VolumeAccess): Promise<{ repaired: Repaired[]; strays: string[] }> {
  const { stagings, strays } = await listStaging(access.layout);
  const repaired: Repaired[] = [];
  for (const staging of stagings) {
    const record = await readRecord(access.layout, staging.key);
    if (!record) {
      strays.push(access.layout.stagingFile(staging.key));
      continue;
    }
    try {
      if ((await establish(access, record, staging)).changed) {
        repaired.push({ key: staging.key, outcome: 'restaged', message: `staged again at ${staging.stagingPath}` });
      }
    } catch (error) {
      repaired.push({ key: staging.key, outcome: 'failed', message: (error as Error).message });
    }
  }
  return { repaired, strays };
}

/** Every mount showing the volume; none when it is not attached (nothing can show it then). */
async function mountsShowing(attachment: Attachment | undefined): Promise<MountEntry[]> {
  if (!attachment) return [];
  return (await readMounts()).filter((entry) => showsVolume(entry, attachment.matchers));
}

function mountPoints(mounts: MountEntry[]): string {
  return [...new Set(mounts.map((entry) => entry.mountPoint))].join(', ');
}

function sameFlags(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((flag, index) => flag === b[index]);
}

function describe(options: { accessType: string; mountFlags: string[] }): string {
  const flags = options.mountFlags.length > 0 ? ` with mount flags ${options.mountFlags.join(',')}` : '';
  return `${options.accessType} access${flags}`;
}

/*
 * The staging and target paths the CO hands us: made when missing (their parent is the CO's), and removed only
 * when they are what we would have made: an empty directory or an empty file. Nothing else outside the pool is
 * ever created or deleted.
 */

export function assertCoPath(target: string, field: string): void {
  if (typeof target !== 'string' || !path.isAbsolute(target) || target.includes('\0')) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `${field} must be an absolute path (got ${JSON.stringify(target)})`,
    );
  }
}

/** Makes the directory unless it exists; resolves true when it made it. A non-directory there: InvalidArgument. */
export async function ensureDirectory(target: string, field: string): Promise<boolean> {
  try {
    await fs.mkdir(target);
    return true;
  } catch (error) {
    if (errorCode(error) !== 'EEXIST') throw error;
  }
  if (!(await fs.stat(target)).isDirectory()) {
    throw new DriverError(FailureType.InvalidArgument, `${field} ${target} exists and is not a directory`);
  }
  return false;
}

/** A file to bind a block device onto; resolves true when it made it. A directory there: InvalidArgument. */
export async function ensureFile(target: string, field: string): Promise<boolean> {
  try {
    await (await fs.open(target, 'wx')).close();
    return true;
  } catch (error) {
    if (errorCode(error) !== 'EEXIST') throw error;
  }
  if ((await fs.stat(target)).isDirectory()) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `${field} ${target} is a directory; a block volume needs a file`,
    );
  }
  return false;
}

/** Removes an empty directory or an empty regular file; anything else (or nothing) is left as it is. */
export async function removeIfEmpty(target: string): Promise<void> {
  let stats;
  try {
    stats = await fs.lstat(target);
  } catch (error) {
    if (isNotFound(error)) return;
    throw error;
  }
  try {
    if (stats.isDirectory()) await fs.rmdir(target);
    else if (stats.isFile() && stats.size === 0) await fs.unlink(target);
  } catch (error) {
    // Not empty after all, or still a mount point: it is not ours to remove.
    if (!['ENOENT', 'ENOTEMPTY', 'EEXIST', 'EBUSY'].includes(errorCode(error) ?? '')) throw error;
  }
}
