/**
 * The dir backend: one directory per volume inside a pool directory. Capacity is reserved (the sum of the
 * volumes' sizes must fit the pool's) and, with `--dir-quota=project` (the default), enforced: each volume's
 * directory is a project of the pool's XFS or ext4 filesystem with a hard block limit of its capacity (the project
 * quotas below). With `none`, nothing stops a user writing more than a volume's size. Staging bind mounts the
 * directory (DirAccess); there is no block access and nothing to format.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import type { AccessType, CreateVolumeSpec, OpenReport } from '../pool/backend';
import { isNotFound, pathExists, removeTree } from '../host/files';
import { bindMatcherOf, isMountOf, mountHolding, readMounts } from '../host/mounts';
import type { MountEntry } from '../host/mounts';
import { copyTree, runTool, unpackTree } from '../host/tools';
import type { Intent } from '../pool/journal';
import { PoolBackend } from '../pool/pool-backend';
import type { PoolBackendOptions } from '../pool/pool-backend';
import type { NewIdentity, PoolLayout } from '../pool/pool-layout';
import { LAST_PROJECT_ID, listRecords, writeRecord } from '../pool/records';
import type { StoredRecord, VolumeShape } from '../pool/records';
import { assertNotInUse } from '../pool/staging';
import type { Attachment, VolumeAccess, VolumeRef } from '../pool/staging';
import type { CopyOrigin } from '../pool/volumes';

export interface DirBackendOptions extends PoolBackendOptions {
  /** `--dir-quota`: `project` enforces each volume's size with a project quota; `none` only reserves it. */
  quota: DirQuotaMode;
  /** The pool filesystem's project quotas; xfs_quota unless a test gives another. Used only with `project`. */
  projectQuotas?: ProjectQuotas;
}

export class DirBackend extends PoolBackend {
  readonly kind = 'dir';
  readonly capabilities = { accessTypes: ['mount'], fsTypes: [] } as const;
  readonly access = new DirAccess(this.layout);
  /** Undefined with --dir-quota=none. */
  private readonly quotas: ProjectQuotas | undefined;

  constructor(options: DirBackendOptions) {
    super(options);
    this.quotas =
      options.quota === 'project' ? (options.projectQuotas ?? new XfsProjectQuotas(this.layout.root)) : undefined;
  }

  /** With quotas: refuses (FailedPrecondition, saying what to do) unless the pool's filesystem enforces them. */
  async checkQuotas(): Promise<void> {
    await this.quotas?.check();
  }

  override async open(fresh?: NewIdentity): Promise<OpenReport> {
    await this.checkQuotas();
    return super.open(fresh);
  }

  shapeOf(spec: CreateVolumeSpec): VolumeShape {
    if (spec.accessType === 'block') {
      throw new DriverError(
        FailureType.InvalidArgument,
        'a dir volume is a directory: block access needs the loop backend',
      );
    }
    return {};
  }

  dataPath(key: string): string {
    return this.layout.volumeDir(key);
  }

  override async volumeIds(key: string, existing: StoredRecord[]): Promise<Pick<StoredRecord, 'projectId'>> {
    if (!this.quotas) return {};
    return { projectId: await this.chooseProject(this.quotas, key, existing) };
  }

  private chooseProject(quotas: ProjectQuotas, key: string, existing: StoredRecord[]): Promise<number> {
    return chooseProjectId(quotas, key, new Set(existing.flatMap((record) => record.projectId ?? [])));
  }

  /**
   * The (empty) directory joins its project before the limit is set: whatever is written later is charged, a
   * restore's or clone's copy included (its files inherit the project as they are made).
   */
  async allocate(record: StoredRecord): Promise<void> {
    if (this.quotas && record.projectId !== undefined) {
      await this.quotas.assign(this.layout.volumeDir(record.key), record.projectId);
      await this.quotas.setLimit(record.projectId, record.capacityBytes);
    }
  }

  /** A restore or clone copies the tree; a move's copy is the archive of the source's tree, extracted here. */
  async copyIn(record: StoredRecord, origin: CopyOrigin, budgetMs: number): Promise<void> {
    const dir = this.layout.volumeDir(record.key);
    await (origin.archive ? unpackTree(origin.path, dir, budgetMs) : copyTree(origin.path, dir, budgetMs));
  }

  snapshotDataPath(key: string): string {
    return this.layout.snapshotDir(key);
  }

  /**
   * A copy of the directory's content, file by file: a directory cannot be frozen on its own (fsfreeze freezes
   * the pool's whole filesystem, every volume on it), so a snapshot of a volume in use is not point-in-time;
   * docs/snapshots.md says so. With reflinks (XFS, btrfs) the copy is quick and shares blocks until written.
   */
  async copyToSnapshot(source: StoredRecord, target: string, budgetMs: number): Promise<void> {
    await copyTree(this.layout.volumeDir(source.key), target, budgetMs);
  }

  /** A moved snapshot: the archive of its tree the source packed (transfer.ts) extracted into its directory. */
  async copyStagedToSnapshot(staged: string, target: string, budgetMs: number): Promise<void> {
    await unpackTree(staged, target, budgetMs);
  }

  /**
   * A group snapshot promises one instant for all its members, and no dir volume can be frozen on its own: one in
   * use (staged or mounted) could be written while the others are copied, so the group is refused
   * (FailedPrecondition, before anything is copied); members nobody uses are copied one after the other, which is
   * of one instant since nothing writes to them.
   */
  async copyGroupToSnapshots(members: { source: StoredRecord; target: string }[], budgetMs: number): Promise<void> {
    for (const { source } of members) {
      try {
        await assertNotInUse(this.access, source);
      } catch (error) {
        if (!(error instanceof DriverError)) throw error;
        throw new DriverError(
          FailureType.FailedPrecondition,
          `a group snapshot of dir volumes is made only of volumes nobody uses (a directory cannot be frozen on its ` +
            `own, so the copies would not be of one instant): ${error.message}`,
        );
      }
    }
    const deadline = Date.now() + budgetMs;
    for (const { source, target } of members) {
      await copyTree(this.layout.volumeDir(source.key), target, Math.max(1, deadline - Date.now()));
    }
  }

  /**
   * The directory goes first, then the project's limit: the intent (or the record) that names the project stays
   * until both are done, so a crash in between leaves the limit for the settling to clear.
   */
  async release({ key, projectId }: Intent): Promise<void> {
    await removeTree(this.layout.volumeDir(key));
    if (this.quotas && projectId !== undefined) await this.quotas.clearLimit(projectId);
  }

  /** The reservation grows, and the limit with it (before the record: a crash in between is corrected at open). */
  async grow(record: StoredRecord, capacityBytes: number): Promise<void> {
    if (this.quotas && record.projectId !== undefined) await this.quotas.setLimit(record.projectId, capacityBytes);
  }

  needsNodeExpansion(): boolean {
    return false;
  }

  async growFilesystem(record: StoredRecord, volumePath: string): Promise<number> {
    const attachment = await this.access.find(record);
    if (!attachment || !(await isMountOf(volumePath, attachment.matchers))) {
      throw new DriverError(FailureType.NotFound, `${volumePath} is not a mount of volume ${record.key}`);
    }
    return record.capacityBytes;
  }

  /**
   * At open, with quotas: every volume's limit is set again from its record (a crash between growing the limit
   * and writing the record left it larger), and volumes made without a project (under --dir-quota=none) are
   * given one, their existing files included.
   */
  override async sweep(): Promise<OpenReport['repaired']> {
    const quotas = this.quotas;
    if (!quotas) return [];
    const repaired: OpenReport['repaired'] = [];
    const records = await listRecords(this.layout);
    for (const record of records) {
      try {
        if (record.projectId !== undefined) {
          await quotas.setLimit(record.projectId, record.capacityBytes);
          continue;
        }
        const projectId = await this.chooseProject(quotas, record.key, records);
        const limited = { ...record, projectId };
        await quotas.assign(this.layout.volumeDir(record.key), projectId);
        await quotas.setLimit(projectId, record.capacityBytes);
        await writeRecord(this.layout, limited);
        records[records.indexOf(record)] = limited;
        const message = `given project ${projectId} with a limit of ${formatBytes(record.capacityBytes)} (it had none)`;
        repaired.push({ key: record.key, outcome: 'limited', message });
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        repaired.push({ key: record.key, outcome: 'failed', message: `project quota not applied: ${reason}` });
      }
    }
    return repaired;
  }
}

/** The node side of dir volumes: the volume directory itself is bind mounted; there is nothing to attach. */
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

/*
 * `--dir-quota`: whether the dir backend enforces each volume's size with a project quota (`project`, the default)
 * or only reserves it (`none`, for development). The decision at start is here: does the filesystem holding the
 * pool enforce project quotas? It is read from /proc/self/mountinfo (the filesystem's own options), which is
 * what the kernel enforces; `xfs_quota`'s `state` prints nothing and exits 0 where quotas are off.
 */

export const DIR_QUOTA_MODES = ['project', 'none'] as const;
export type DirQuotaMode = (typeof DIR_QUOTA_MODES)[number];

/** What a person needs to do for the pool's filesystem to enforce project quotas; undefined when it does. */
export function missingProjectQuota(mount: Pick<MountEntry, 'fsType' | 'superOptions'>): string | undefined {
  const options = new Set(mount.superOptions);
  switch (mount.fsType) {
    case 'xfs':
      // The kernel shows `prjquota` when project quotas are enforced and `pqnoenforce` when only accounted.
      if (options.has('prjquota') || options.has('pquota')) return undefined;
      return options.has('pqnoenforce')
        ? 'its project quotas are accounted but not enforced: mount it with -o prjquota instead of pqnoenforce'
        : 'mount the XFS filesystem with -o prjquota (it cannot be turned on by a remount; for the root ' +
            'filesystem, boot with rootflags=prjquota)';
    case 'ext4':
      if (options.has('prjquota')) return undefined;
      return (
        'give the ext4 filesystem the project quota feature (tune2fs -O quota,project, unmounted) and mount it ' +
        'with -o prjquota'
      );
    default:
      return `project quotas need XFS or ext4: put the pool on XFS mounted -o prjquota, or ext4 with -O quota,project mounted -o prjquota`;
  }
}

/** The refusal: names the pool, its filesystem, what is missing, and the development way out. */
export function projectQuotaRefusal(pool: string, mount: Pick<MountEntry, 'fsType' | 'mountPoint'>, missing: string) {
  return (
    `--dir-quota=project: pool ${pool} is on the ${mount.fsType} filesystem mounted at ${mount.mountPoint}, which ` +
    `does not enforce project quotas, so a volume could fill it: ${missing}. For development only, ` +
    `--dir-quota=none runs the dir backend without enforcing volume sizes.`
  );
}

/** The mount holding the pool (or, before the pool exists, its nearest existing parent). */
export async function poolMount(pool: string): Promise<MountEntry> {
  let candidate = path.resolve(pool);
  for (;;) {
    try {
      await fs.stat(candidate);
      return (await mountHolding(candidate, await readMounts())).holder;
    } catch (error) {
      if (!isNotFound(error) || candidate === path.dirname(candidate)) throw error;
      candidate = path.dirname(candidate);
    }
  }
}

/** At start with --dir-quota=project: FailedPrecondition with the refusal unless the pool's filesystem enforces. */
export async function assertProjectQuotas(pool: string): Promise<MountEntry> {
  const mount = await poolMount(pool);
  const missing = missingProjectQuota(mount);
  if (missing !== undefined) {
    throw new DriverError(FailureType.FailedPrecondition, projectQuotaRefusal(pool, mount, missing));
  }
  return mount;
}

/*
 * Project quotas of the pool's filesystem, through xfsprogs' `xfs_quota` (XFS, and ext4 in its foreign mode `-f`).
 * Each quota-enforced dir volume is a project: its directory carries the project ID with the inherit flag (so
 * everything made inside joins it), and the project has a hard block limit of the volume's capacity.
 */

export interface ProjectQuotas {
  /** Refuses (FailedPrecondition, with what to do) unless the pool's filesystem enforces project quotas. */
  check(): Promise<void>;
  /** True when nothing (no inode, no block, no limit) is charged to the project on the pool's filesystem. */
  isFree(projectId: number): Promise<boolean>;
  /** Gives `dir` and everything in it the project ID, and the inherit flag. Idempotent. */
  assign(dir: string, projectId: number): Promise<void>;
  /** Sets the project's hard block limit. Idempotent. */
  setLimit(projectId: number, bytes: number): Promise<void>;
  /** Removes the project's limits. Idempotent. */
  clearLimit(projectId: number): Promise<void>;
}

/** Project IDs the driver chooses from: above those people number by hand, up to LAST_PROJECT_ID (signed tools). */
export const FIRST_PROJECT_ID = 1 << 24;

/** The first candidate for a volume, derived from its key (random hex) so that pools sharing a filesystem spread out. */
export function projectIdCandidate(key: string): number {
  const span = LAST_PROJECT_ID - FIRST_PROJECT_ID + 1;
  return FIRST_PROJECT_ID + (Number.parseInt(key.slice(0, 8), 16) % span);
}

export function nextProjectId(id: number): number {
  return id >= LAST_PROJECT_ID ? FIRST_PROJECT_ID : id + 1;
}

/**
 * A project ID for a new volume: the key's candidate or the next ones, skipping IDs the pool's records hold and
 * IDs the filesystem charges anything to (another pool, kubelet's own quotas, a person's).
 */
export async function chooseProjectId(quotas: ProjectQuotas, key: string, taken: Set<number>): Promise<number> {
  let id = projectIdCandidate(key);
  for (let tries = 0; tries < 64; tries++, id = nextProjectId(id)) {
    if (!taken.has(id) && (await quotas.isFree(id))) return id;
  }
  throw new DriverError(FailureType.Internal, `no free project ID near ${projectIdCandidate(key)} for volume ${key}`);
}

/** xfs_quota splits its command line on white space: a volume's directory must not hold any. */
function assertToolPath(dir: string): void {
  if (/[\s'"\\]/.test(dir)) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `--dir-quota=project needs a pool path without white space, quotes or backslashes: ${JSON.stringify(dir)}`,
    );
  }
}

/** The xfs_quota commands, run on the filesystem holding the pool. */
export class XfsProjectQuotas implements ProjectQuotas {
  private mountPoint: string | undefined;

  constructor(private readonly pool: string) {}

  async check(): Promise<void> {
    assertToolPath(this.pool);
    this.mountPoint = (await assertProjectQuotas(this.pool)).mountPoint;
    await runTool('xfs_quota', ['-V']);
  }

  async isFree(projectId: number): Promise<boolean> {
    // `quota` prints nothing for a project with no usage and no limits (-N: no header).
    return (await this.run(`quota -p -N -b -i ${projectId}`)).trim() === '';
  }

  async assign(dir: string, projectId: number): Promise<void> {
    assertToolPath(dir);
    await this.run(`project -s -p ${dir} ${projectId}`);
  }

  async setLimit(projectId: number, bytes: number): Promise<void> {
    await this.run(`limit -p bhard=${bytes} ${projectId}`);
  }

  async clearLimit(projectId: number): Promise<void> {
    await this.run(`limit -p bsoft=0 bhard=0 isoft=0 ihard=0 ${projectId}`);
  }

  /**
   * One command, expert and foreign mode (ext4), with empty projects files so the host's /etc/projects and
   * /etc/projid cannot add paths or names. xfs_quota exits 0 on many failures: anything on stderr fails.
   */
  private async run(command: string): Promise<string> {
    this.mountPoint ??= (await assertProjectQuotas(this.pool)).mountPoint;
    const args = ['-x', '-f', '-D', '/dev/null', '-P', '/dev/null', '-c', command, this.mountPoint];
    return runTool('xfs_quota', args, { stderrFails: true });
  }
}
