/**
 * Stage and unstage, the same for every backend: the backend's VolumeAccess says how a volume is attached and
 * what is mounted at the staging path. The staging record is written before anything is attached or mounted
 * and removed after everything is undone, so a crash at any step leaves the volume counted as staged.
 */
import { DriverError, FailureType } from '../../common/failures';
import type { OpenReport, StageOptions } from '../pool/backend';
import { assertCoPath, ensureDirectory, removeIfEmpty } from './co-paths';
import { pathExists } from '../host/files';
import type { MountEntry } from '../host/mounts';
import {
  bindMount,
  mountFilesystem,
  readMounts,
  realPathIfExists,
  showsVolume,
  topMountAt,
  unmountVolumeAt,
} from '../host/mounts';
import { listStaging, readStaging, removeStaging, writeStaging } from './staging-records';
import type { StagingRecord } from './staging-records';
import type { Attachment, VolumeAccess, VolumeRef } from './volume-access';
import { readRecord } from '../pool/records';

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
