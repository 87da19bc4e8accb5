/**
 * Publish and unpublish, the same for every backend: a bind mount of the staged volume (block: of its device,
 * onto a file) at the CO's target path, read-only when asked; NodeGetVolumeStats, the usage seen through the
 * CO's path; and the health of a volume and of the pool (NodeGetVolumeHealth, NodeGetStorageHealth, and the
 * abnormal condition of NodeGetVolumeStats), one checker for all three, read from what the node sees.
 */
import { promises as fs } from 'node:fs';
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import type { PoolProblem, PublishOptions, VolumeProblem, VolumeStats, VolumeUsage } from './backend';
import { errorCode, pathExists } from '../host/files';
import {
  bindMount,
  deviceBytes,
  mountHolding,
  readMounts,
  showsVolume,
  topMountAt,
  unmountVolumeAt,
} from '../host/mounts';
import { readIdentity, type PoolIdentity, type PoolLayout } from './pool-layout';
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

/**
 * `dataPath` is the volume's data in the pool (its directory or image file). `problems` are those of the volume and
 * of its pool (`volumeProblems`), the same NodeGetVolumeHealth answers.
 */
export async function volumeStats(
  access: VolumeAccess,
  volume: VolumeRef,
  dataPath: string,
  volumePath: string,
  poolProblems: PoolProblem[],
): Promise<VolumeStats> {
  assertCoPath(volumePath, 'volume path');
  const { key } = volume;
  if (!(await pathExists(volumePath))) {
    throw new DriverError(FailureType.NotFound, `volume path ${volumePath} does not exist`);
  }
  const problems = [...poolProblems.map(asVolumeProblem), ...(await volumeProblems(access, volume, dataPath))];
  const attachment = await access.find(volume);
  const top = attachment && (await topMountAt(volumePath));
  let usage: VolumeUsage[];
  if (attachment && top && showsVolume(top, attachment.matchers)) {
    usage =
      volume.accessType === 'block' && attachment.device
        ? [{ unit: 'bytes' as const, total: await deviceBytes(attachment.device) }]
        : await filesystemUsage(volumePath);
  } else if (problems.some((problem) => problem.status !== 'degraded')) {
    // Nothing shows the volume because of what is wrong with it: the problem is the answer.
    usage = [];
  } else {
    throw new DriverError(FailureType.NotFound, `${volumePath} is not a mount of volume ${key}`);
  }
  const abnormal = problems.length > 0;
  return {
    usage,
    problems,
    abnormal,
    message: abnormal ? problems.map((p) => p.message).join('; ') : 'volume is healthy',
  };
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

/* Health. */

/** Below this share of its size free, the pool's filesystem counts as full. */
const FULL_BELOW = 0.01;

/**
 * The volume's own problems, given that its pool is there (`poolProblems` says when it is not): its data gone from
 * the pool, or staged with no device attached (a loop device detached by hand).
 */
export async function volumeProblems(
  access: VolumeAccess,
  volume: VolumeRef,
  dataPath: string,
): Promise<VolumeProblem[]> {
  const { key } = volume;
  if (!(await pathExists(dataPath))) {
    return [
      {
        status: 'data-loss',
        reason: 'VolumeDataMissing',
        message:
          `the data of volume ${key} (${dataPath}) is missing from its pool, which is mounted: ` +
          'restore the claim from a snapshot or a backup',
      },
    ];
  }
  const staging = await readStaging(access.layout, key);
  if (staging && !(await access.find(volume))) {
    return [
      {
        status: 'inaccessible',
        reason: 'DeviceDetached',
        message:
          `volume ${key} is staged at ${staging.stagingPath} but has no device attached (detached by hand?): ` +
          'restart the node agent, which attaches and mounts staged volumes again at start, then restart the Pod',
      },
    ];
  }
  return [];
}

/**
 * The pool's problems: its filesystem failing reads, its disk no longer mounted at the pool directory (the identity
 * there is not the open pool's; then the rest is not looked at, it would describe another filesystem), its filesystem
 * read-only or failing writes, or full.
 */
export async function poolProblems(layout: PoolLayout, poolId: string): Promise<PoolProblem[]> {
  let onDisk: PoolIdentity | undefined;
  try {
    onDisk = await readIdentity(layout);
  } catch (error) {
    // An identity that is not one reads as none (below); an errno is the filesystem's own failure, not an unmount.
    const code = errorCode(error);
    if (code) {
      // (Not even the pool directory can be stat'ed: `findmnt --target` on the node names the device.)
      return [
        {
          status: 'unreachable',
          reason: 'PoolIOError',
          message:
            `the filesystem holding pool ${layout.root} fails reads ` +
            `(${code} reading ${layout.identityFile}), as a failing disk or an XFS shut down after an error does: ` +
            'volumes on it are inaccessible, and nothing can be staged, created, deleted or snapshotted. Check the ' +
            'kernel log; unmount the filesystem, repair it (xfs_repair, fsck) and mount it again',
        },
      ];
    }
  }
  if (onDisk?.poolId !== poolId) {
    const found = onDisk ? `pool ${onDisk.poolId}` : 'no pool identity';
    return [
      {
        status: 'unreachable',
        reason: 'PoolNotMounted',
        message:
          `pool directory ${layout.root} holds ${found}, not the open pool ${poolId}: its disk is no longer mounted ` +
          'there. Volumes still attached keep working; nothing can be staged, created, deleted or snapshotted. ' +
          `Mount the disk holding pool ${poolId} at ${layout.root} again`,
      },
    ];
  }
  const problems: PoolProblem[] = [];
  const { holder } = await mountHolding(layout.root, await readMounts());
  const where = `the filesystem holding pool ${layout.root} (${holder.source} on ${holder.mountPoint})`;
  const mountedReadOnly = holder.readonly || holder.superOptions.includes('ro');
  const refusal = mountedReadOnly ? undefined : await writeRefusal(layout);
  if (mountedReadOnly || refusal === 'EROFS') {
    const how = mountedReadOnly
      ? 'is read-only'
      : 'refuses writes (EROFS), though mounted read-write: the kernel stopped them after an error';
    problems.push({
      status: 'degraded',
      reason: 'PoolReadOnly',
      message:
        `${where} ${how}: ` +
        'volumes can be read, not written, and nothing can be created, deleted or grown. Check the kernel log for ' +
        'the error that made it read-only, repair the filesystem, and mount it read-write again',
    });
  } else if (refusal) {
    problems.push({
      status: 'degraded',
      reason: 'PoolIOError',
      message:
        `${where} fails writes (${refusal} writing ${layout.writeProbeFile}): creations, deletions, expansions and ` +
        'snapshots fail, and so may volumes writing. Check the kernel log for the disk or filesystem error; ' +
        'unmount the filesystem, repair it (xfs_repair, fsck) and mount it again',
    });
  }
  const stats = await fs.statfs(layout.root);
  const total = stats.blocks * stats.bsize;
  const free = stats.bavail * stats.bsize;
  if (free < total * FULL_BELOW) {
    problems.push({
      status: 'degraded',
      reason: 'PoolFull',
      message:
        `the filesystem holding pool ${layout.root} is full (${formatBytes(free)} of ${formatBytes(total)} free): ` +
        'new volumes, snapshots and expansions are refused, and writes to blocks a volume shares with a snapshot ' +
        'fail. Free space on that filesystem (files outside the pool, or delete snapshots and volumes)',
    });
  }
  return problems;
}

/**
 * The error code with which the pool's filesystem refuses a write, or undefined when it takes one. mountinfo is not
 * enough: on current kernels an ext4 that hit an error under errors=remount-ro refuses writes (EROFS) while mountinfo
 * still says `rw`. So the check creates and removes one empty file in the pool's root, as the driver's own writes
 * would. A full pool (ENOSPC, EDQUOT) is PoolFull's, read from statfs.
 *
 * A write to a frozen filesystem (an operator's `fsfreeze` for a backup of the disk) waits for the thaw: the check
 * waits WRITE_CHECK_WAIT_MS and then judges nothing, and one probe at most waits per pool, so that kubelet's health
 * calls neither hang nor fill libuv's threads with blocked writes.
 */
function writeRefusal(layout: PoolLayout): Promise<string | undefined> {
  const file = layout.writeProbeFile;
  let probe = probing.get(file);
  if (!probe) {
    probe = tryWrite(file).finally(() => probing.delete(file));
    probing.set(file, probe);
  }
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<undefined>(
    (resolve) => (timer = setTimeout(() => resolve(undefined), WRITE_CHECK_WAIT_MS)),
  );
  return Promise.race([probe, waited]).finally(() => clearTimeout(timer));
}

const WRITE_CHECK_WAIT_MS = 2000;
const probing = new Map<string, Promise<string | undefined>>();

async function tryWrite(file: string): Promise<string | undefined> {
  try {
    await (await fs.open(file, 'w')).close();
    await fs.rm(file, { force: true });
    return undefined;
  } catch (error) {
    const code = errorCode(error) ?? String(error);
    return code === 'ENOSPC' || code === 'EDQUOT' ? undefined : code;
  }
}

/** What a problem of the pool means for one of its volumes: unreachable storage, an inaccessible volume. */
export function asVolumeProblem(problem: PoolProblem): VolumeProblem {
  return { ...problem, status: problem.status === 'unreachable' ? 'inaccessible' : 'degraded' };
}

/** NodeGetVolumeStats when the pool's disk is not mounted: no record to read, the pool's problem is the answer. */
export function unreachableStats(pool: PoolProblem[]): VolumeStats {
  const problems = pool.map(asVolumeProblem);
  return { usage: [], problems, abnormal: true, message: problems.map((problem) => problem.message).join('; ') };
}
