/**
 * The dir backend: one directory per volume inside a pool directory. Capacity is reserved (the sum of the
 * volumes' sizes must fit the pool's) and, with `--dir-quota=project` (the default), enforced: each volume's
 * directory is a project of the pool's XFS or ext4 filesystem with a hard block limit of its capacity
 * (storage/dir/project-quotas.ts). With `none`, nothing stops a user writing more than a volume's size.
 * Staging bind mounts the directory; there is no block access and nothing to format.
 */
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import type { CreateVolumeSpec, OpenReport } from '../pool/backend';
import { DirAccess } from './dir-access';
import type { DirQuotaMode } from './dir-quota';
import type { Intent } from '../pool/journal';
import { isMountOf } from '../host/mounts';
import { PoolBackend } from '../pool/pool-backend';
import { copyTree } from '../host/tools';
import type { NewIdentity } from '../pool/pool-layout';
import type { PoolBackendOptions } from '../pool/pool-backend';
import { XfsProjectQuotas, chooseProjectId } from './project-quotas';
import type { ProjectQuotas } from './project-quotas';
import { removeTree } from '../host/files';
import type { CopyOrigin } from '../pool/volumes';
import { listRecords, writeRecord } from '../pool/records';
import type { StoredRecord, VolumeShape } from '../pool/records';

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

  async copyIn(record: StoredRecord, origin: CopyOrigin, budgetMs: number): Promise<void> {
    await copyTree(origin.path, this.layout.volumeDir(record.key), budgetMs);
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
