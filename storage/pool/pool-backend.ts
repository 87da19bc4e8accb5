/**
 * The pool: the one implementation of StorageBackend, and what every backend shares: identity, lock, records,
 * intent journal, reconciliation, staging and publishing, capacity by reservation. A backend (dir-backend.ts,
 * loop-backend.ts) extends it with how a volume is allocated, released, grown and copied, and how it is attached
 * (its VolumeAccess). Every call runs alone; the journaled work is in volumes.ts and snapshots.ts, staging and
 * publishing in staging.ts and publishing.ts.
 *
 * Past the StorageBackend contract, the members are the pool's parts and the backend's hooks. They are public for
 * the pool's own work in the modules beside this one, which take the pool itself (no adapter between them):
 * callers above storage/ hold a StorageBackend and see none of them.
 */
import { promises as fs } from 'node:fs';
import { DEFAULT_COPY_BUDGET } from '../../common/copy-budget';
import type { CopyBudget } from '../../common/copy-budget';
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import type {
  BackendCapabilities,
  CreateGroupSnapshotSpec,
  CreateSnapshotSpec,
  CreateVolumeSpec,
  ExpandResult,
  MoveFence,
  OpenReport,
  PoolStatus,
  PublishOptions,
  SnapshotPage,
  SnapshotRecord,
  StageOptions,
  StorageBackend,
  VolumePage,
  VolumeRecord,
  VolumeStats,
  PoolProblem,
  VolumeProblem,
} from './backend';
import { reconcilePool, thawFrozen } from './journal';
import type { Intent } from './journal';
import { CopiesInFlight, PoolIndexes } from './pool-indexes';
import {
  PoolLayout,
  acquirePoolLock,
  assertMoveKey,
  assertSnapshotKey,
  assertVolumeKey,
  ensurePoolIdentity,
  readIdentity,
} from './pool-layout';
import type { NewIdentity, PoolIdentity, PoolLock } from './pool-layout';
import {
  asVolumeProblem,
  poolProblems,
  publish,
  unpublish,
  unreachableStats,
  volumeProblems,
  volumeStats,
} from './publishing';
import { assertCreateVolumeSpec, isSize, mustReadVolume, readRecord } from './records';
import type { StoredRecord, VolumeShape } from './records';
import {
  createGroupSnapshot,
  createSnapshot,
  deleteGroupSnapshot,
  deleteSnapshot,
  assertCreateSnapshotSpec,
  readSnapshot,
} from './snapshots';
import type { StoredSnapshot } from './snapshots';
import { restageAll, stage, unstage } from './staging';
import { stagedReservation, writeStagedReservation } from './transfer';
import type { VolumeAccess } from './staging';
import { assertNotMoving, createVolume, deleteVolume, expandVolume, fenceVolume, unfenceVolume } from './volumes';
import type { CopyOrigin } from './volumes';

export interface PoolBackendOptions {
  /** Absolute path of the pool directory; created if missing. */
  pool: string;
  capacityBytes: number;
  /** How long each copy (snapshot, restore, clone) may take; DEFAULT_COPY_BUDGET unless the node says otherwise. */
  copyBudget?: CopyBudget;
}

interface OpenPool {
  poolId: string;
  lock: PoolLock;
}

type Repaired = OpenReport['repaired'];

export abstract class PoolBackend implements StorageBackend {
  abstract readonly kind: string;
  abstract readonly capabilities: BackendCapabilities;
  readonly layout: PoolLayout;
  readonly capacityBytes: number;
  /** How long each copy may take (common/copy-budget.ts). */
  readonly copyBudget: CopyBudget;
  /** The copies running without the pool held: their source and target are refused to every change. */
  readonly copies = new CopiesInFlight(this);
  /** The volumes and snapshots in memory, read from disk on first use after open(). */
  readonly indexes: PoolIndexes;
  /**
   * Every call, reads included, runs alone: each sees a settled journal and a consistent pool. A copy holds it only
   * to begin and to record: kubelet's calls on other volumes are not kept waiting for minutes behind it.
   */
  private readonly mutex = new AsyncMutex();
  private opened: OpenPool | undefined;
  /** The last figures status() read, answered while another call holds the pool. */
  private lastStatus: PoolStatus | undefined;

  constructor(options: PoolBackendOptions) {
    this.layout = new PoolLayout(options.pool);
    if (!isSize(options.capacityBytes)) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `pool capacity ${String(options.capacityBytes)} is not a whole number of bytes >= 0`,
      );
    }
    this.capacityBytes = options.capacityBytes;
    this.copyBudget = options.copyBudget ?? DEFAULT_COPY_BUDGET;
    this.indexes = new PoolIndexes(this);
  }

  /* The backend's hooks. */

  /** How the backend's volumes are attached and recognised in the mount table (staging.ts). */
  abstract readonly access: VolumeAccess;
  /** Checks and completes what a create asks for beyond the common fields; runs before anything is touched. */
  abstract shapeOf(spec: CreateVolumeSpec): VolumeShape;
  /** The volume's data inside the pool (VolumeRecord.path). */
  abstract dataPath(key: string): string;
  /**
   * Fills the freshly made volume directory, with the pool held; for a restore or clone (`origin`, its capacity
   * already checked to be at least the source's) only what must precede the copy. The record is written only after
   * it (and copyIn) succeeded.
   */
  abstract allocate(record: StoredRecord, origin?: CopyOrigin): Promise<void>;
  /** A restore's or clone's copy from `origin` into the allocated volume, without the pool held, within budgetMs. */
  abstract copyIn(record: StoredRecord, origin: CopyOrigin, budgetMs: number): Promise<void>;
  /** A snapshot's copy inside the pool (SnapshotRecord.path): dir: its directory; loop: its image file. */
  abstract snapshotDataPath(key: string): string;
  /**
   * Copies the volume's data to `target` (snapshotDataPath of the new snapshot, whose directory exists), without the
   * pool held (no call changes the source meanwhile: CopiesInFlight), within budgetMs.
   */
  abstract copyToSnapshot(source: StoredRecord, target: string, budgetMs: number): Promise<void>;
  /**
   * A moved snapshot's copy (snapshots.ts, a move's adopt): the verified file a move pulled (an image, or a dir
   * pool's archive of a tree: transfer.ts movesAsArchive) made the snapshot's copy at `target`, within budgetMs.
   */
  abstract copyStagedToSnapshot(staged: string, target: string, budgetMs: number): Promise<void>;
  /**
   * A group snapshot's copies (snapshots.ts, createGroupSnapshot): each member's data to its target, all of one
   * instant (docs/snapshots.md, "Group snapshots"), without the pool held, within budgetMs for them all. A member
   * the backend cannot take at that instant with the others: FailedPrecondition, before anything is copied.
   */
  abstract copyGroupToSnapshots(members: { source: StoredRecord; target: string }[], budgetMs: number): Promise<void>;
  /**
   * Frees everything the volume of `intent` holds in the pool: the delete it records, or the create it rolls back
   * (journal.ts, settleIntent). Idempotent.
   */
  abstract release(intent: Intent): Promise<void>;
  /** Makes the volume's storage (not its record) capacityBytes large. Idempotent. */
  abstract grow(record: StoredRecord, capacityBytes: number): Promise<void>;
  abstract needsNodeExpansion(record: StoredRecord): boolean;
  /** NodeExpandVolume: checks volumePath shows the volume, grows device and filesystem, returns the capacity. */
  abstract growFilesystem(record: StoredRecord, volumePath: string): Promise<number>;

  /** What a volume of this capacity takes from the pool. */
  allocatedBytes(capacityBytes: number): number {
    return capacityBytes;
  }

  /**
   * Refuses (ResourceExhausted) when the pool's storage cannot hold `bytes` more, whatever is reserved; `what` names
   * it for the message (`volume "pvc-1"`).
   */
  async checkSpace(_bytes: number, _what: string): Promise<void> {}

  /**
   * What a new volume is given besides its spec, before its intent is written (dir with quotas: a project ID,
   * journaled so that a crash part way can undo it). `existing` are the pool's records.
   */
  async volumeIds(_key: string, _existing: StoredRecord[]): Promise<Pick<StoredRecord, 'projectId'>> {
    return {};
  }

  /** At open, after restaging: undoes what no staging record explains (loop: stray attached devices). */
  async sweep(): Promise<Repaired> {
    return [];
  }

  /* The StorageBackend contract (backend.ts). */

  open(fresh?: NewIdentity): Promise<OpenReport> {
    return this.mutex.run(() => this.openPool(fresh));
  }

  identity(): Promise<PoolIdentity | undefined> {
    return readIdentity(this.layout);
  }

  close(): Promise<void> {
    return this.mutex.run(async () => {
      const opened = this.opened;
      this.opened = undefined;
      this.indexes.drop();
      this.lastStatus = undefined;
      await opened?.lock.release();
    });
  }

  /**
   * While another call holds the pool (a format, a growth), the last figures are answered at once: the presence
   * heartbeat reads them every 10 s, and waiting would make a busy node look offline. They are at most one call old.
   */
  async status(): Promise<PoolStatus> {
    if (this.mutex.busy && this.lastStatus && this.opened) return { ...this.lastStatus };
    this.lastStatus = await this.freshStatus();
    return { ...this.lastStatus };
  }

  private freshStatus(): Promise<PoolStatus> {
    return this.locked(async ({ poolId }) => {
      const { size } = await this.indexes.records();
      const snapshots = await this.indexes.snapshots();
      const reservedBytes = await this.indexes.reservedBytes();
      return {
        poolId,
        capacityBytes: this.capacityBytes,
        reservedBytes,
        availableBytes: Math.max(0, this.capacityBytes - reservedBytes),
        volumeCount: size,
        snapshotCount: snapshots.size,
      };
    });
  }

  async createVolume(spec: CreateVolumeSpec): Promise<VolumeRecord> {
    assertCreateVolumeSpec(spec);
    const shape = this.shapeOf(spec);
    return this.toVolume(await createVolume(this, spec, shape));
  }

  async deleteVolume(key: string): Promise<{ existed: boolean }> {
    assertVolumeKey(key);
    return this.locked(() => deleteVolume(this, key));
  }

  async getVolume(key: string): Promise<VolumeRecord | undefined> {
    assertVolumeKey(key);
    return this.locked(async () => {
      const record = await readRecord(this.layout, key);
      return record && this.toVolume(record);
    });
  }

  listVolumes(): Promise<VolumeRecord[]> {
    return this.locked(async () => (await this.indexes.records()).all().map((record) => this.toVolume(record)));
  }

  async listVolumePage(afterKey: string | undefined, limit: number): Promise<VolumePage> {
    assertPageLimit(limit);
    return this.locked(async () => {
      const { entries, more } = (await this.indexes.records()).page(afterKey, limit);
      return { volumes: entries.map((record) => this.toVolume(record)), more };
    });
  }

  async expandVolume(key: string, capacityBytes: number): Promise<ExpandResult> {
    assertVolumeKey(key);
    if (!isSize(capacityBytes)) {
      throw new DriverError(FailureType.InvalidArgument, `capacity ${capacityBytes} is not a whole number of bytes`);
    }
    return this.locked(() => expandVolume(this, key, capacityBytes));
  }

  async fenceVolume(key: string, fence: MoveFence, replacing?: string): Promise<void> {
    assertVolumeKey(key);
    assertMoveKey(fence.moveKey);
    if (replacing !== undefined) assertMoveKey(replacing);
    return this.locked(() => fenceVolume(this, key, fence, replacing));
  }

  /**
   * Target of a move, before its pull writes anything: reserves the capacity the adopted volume will take
   * (transfer.ts, "Room on the target"); ResourceExhausted, nothing written, without it. The same move again is a
   * no-op, its reservation kept on disk until the adopt records the volume or the copy is discarded.
   */
  async reserveStagedCopy(moveKey: string, sizeBytes: number): Promise<void> {
    assertMoveKey(moveKey);
    if (!isSize(sizeBytes)) {
      throw new DriverError(FailureType.InvalidArgument, `move ${moveKey}'s size ${String(sizeBytes)} is not a size`);
    }
    return this.locked(async () => {
      if ((await stagedReservation(this.layout, moveKey)) !== undefined) return;
      const bytes = this.allocatedBytes(sizeBytes);
      await this.assertRoom(bytes, `the copy of move ${moveKey}`);
      await writeStagedReservation(this.layout, moveKey, bytes);
    });
  }

  async unfenceVolume(key: string, moveKey: string): Promise<boolean> {
    assertVolumeKey(key);
    assertMoveKey(moveKey);
    return this.locked(() => unfenceVolume(this, key, moveKey));
  }

  async createSnapshot(spec: CreateSnapshotSpec): Promise<SnapshotRecord> {
    assertCreateSnapshotSpec(spec);
    return this.toSnapshot(await createSnapshot(this, spec));
  }

  async deleteSnapshot(key: string, options: { asMember?: boolean } = {}): Promise<'deleted' | 'absent'> {
    assertSnapshotKey(key);
    return this.locked(() => deleteSnapshot(this, key, options));
  }

  async createGroupSnapshot(spec: CreateGroupSnapshotSpec): Promise<SnapshotRecord[]> {
    assertGroupSpec(spec);
    return (await createGroupSnapshot(this, spec)).map((record) => this.toSnapshot(record));
  }

  async deleteGroupSnapshot(groupKey: string, memberKeys: string[]): Promise<'deleted' | 'absent'> {
    assertSnapshotKey(groupKey);
    if (!Array.isArray(memberKeys)) throw new DriverError(FailureType.InvalidArgument, 'member keys are required');
    for (const key of memberKeys) assertSnapshotKey(key);
    return this.locked(() => deleteGroupSnapshot(this, groupKey, memberKeys));
  }

  async getSnapshot(key: string): Promise<SnapshotRecord | undefined> {
    assertSnapshotKey(key);
    return this.locked(async () => {
      const record = await readSnapshot(this.layout, key);
      return record && this.toSnapshot(record);
    });
  }

  listSnapshots(): Promise<SnapshotRecord[]> {
    return this.locked(async () => (await this.indexes.snapshots()).all().map((record) => this.toSnapshot(record)));
  }

  async listSnapshotPage(
    afterKey: string | undefined,
    limit: number,
    only: { key?: string; sourceKey?: string; groupKey?: string } = {},
  ): Promise<SnapshotPage> {
    assertPageLimit(limit);
    const matches = (record: StoredSnapshot) =>
      (only.key === undefined || record.key === only.key) &&
      // A moved snapshot's sourceKey is a key of another node's pool: never a snapshot of a volume of this one.
      (only.sourceKey === undefined || (record.sourceKey === only.sourceKey && record.sourceVolumeId === undefined)) &&
      (only.groupKey === undefined || record.groupKey === only.groupKey);
    return this.locked(async () => {
      const { entries, more } = (await this.indexes.snapshots()).page(afterKey, limit, matches);
      return { snapshots: entries.map((record) => this.toSnapshot(record)), more };
    });
  }

  /**
   * The node calls that mount or unmount (stage, unstage, publish, unpublish, filesystem growth) are refused
   * (Aborted, kubelet retries) while the volume is copied: its filesystem may be frozen, and the copy reads it as it
   * was when it began.
   */
  stageVolume(key: string, stagingPath: string, options: StageOptions): Promise<void> {
    return this.withVolume(
      key,
      (record) => {
        assertNotMoving(record, `stage volume ${key}`);
        return stage(this.access, record, stagingPath, options);
      },
      'stage',
    );
  }

  unstageVolume(key: string, stagingPath: string): Promise<void> {
    return this.withVolume(key, (record) => unstage(this.access, record, stagingPath), 'unstage');
  }

  publishVolume(key: string, stagingPath: string, targetPath: string, options: PublishOptions): Promise<void> {
    const task = (record: StoredRecord) => publish(this.access, record, stagingPath, targetPath, options);
    return this.withVolume(key, task, 'publish');
  }

  unpublishVolume(key: string, targetPath: string): Promise<void> {
    return this.withVolume(key, (record) => unpublish(this.access, record, targetPath), 'unpublish');
  }

  volumeStats(key: string, volumePath: string): Promise<VolumeStats> {
    return this.withPool(key, (pool, record) => {
      if (!record) return Promise.resolve(unreachableStats(pool));
      return volumeStats(this.access, record, this.dataPath(key), volumePath, pool);
    });
  }

  volumeHealth(key: string): Promise<VolumeProblem[]> {
    return this.withPool(key, async (pool, record) => [
      ...pool.map(asVolumeProblem),
      ...(record ? await volumeProblems(this.access, record, this.dataPath(key)) : []),
    ]);
  }

  poolHealth(): Promise<PoolProblem[]> {
    return this.locked(({ poolId }) => poolProblems(this.layout, poolId));
  }

  expandFilesystem(key: string, volumePath: string): Promise<{ capacityBytes: number }> {
    return this.withVolume(
      key,
      async (record) => ({ capacityBytes: await this.growFilesystem(record, volumePath) }),
      'expand the filesystem of',
    );
  }

  /* The pool's parts, for its own work (volumes.ts, snapshots.ts). */

  /** Runs `task` with the pool held; FailedPrecondition unless it is open. */
  locked<T>(task: (opened: OpenPool) => Promise<T>): Promise<T> {
    return this.mutex.run(async () => {
      if (!this.opened) {
        throw new DriverError(
          FailureType.FailedPrecondition,
          `pool ${this.layout.root} is not open; call open() first`,
        );
      }
      return task(this.opened);
    });
  }

  /**
   * ResourceExhausted, nothing changed, unless both the pool's capacity and its storage have `bytes` to spare;
   * `releasing` is capacity already reserved for the same bytes (a move's staged copy, for its adopt).
   */
  async assertRoom(bytes: number, what: string, releasing = 0): Promise<void> {
    const availableBytes = Math.max(0, this.capacityBytes - (await this.indexes.reservedBytes()) + releasing);
    if (bytes > availableBytes) {
      throw new DriverError(
        FailureType.ResourceExhausted,
        `cannot reserve ${formatBytes(bytes)} for ${what}: ` +
          `${formatBytes(availableBytes)} of the pool's ${formatBytes(this.capacityBytes)} is available`,
      );
    }
    await this.checkSpace(bytes, what);
  }

  /** Runs a node call on an existing volume; NotFound when it is not in the pool, Aborted (`changing`) while copied. */
  private withVolume<T>(key: string, task: (record: StoredRecord) => Promise<T>, changing?: string): Promise<T> {
    assertVolumeKey(key);
    return this.locked(async () => {
      const record = await mustReadVolume(this.layout, key);
      if (changing) this.copies.assertVolumeFree(key, `${changing} volume ${key}`);
      return task(record);
    });
  }

  /**
   * A health check of a volume: the pool's problems, and its record unless the pool's disk is not mounted (then
   * there is no record to read, and the volume is inaccessible whether or not it exists: its ID names this pool).
   */
  private withPool<T>(key: string, task: (pool: PoolProblem[], record?: StoredRecord) => Promise<T>): Promise<T> {
    assertVolumeKey(key);
    return this.locked(async ({ poolId }) => {
      const pool = await poolProblems(this.layout, poolId);
      if (pool.some((problem) => problem.status === 'unreachable')) return task(pool);
      return task(pool, await mustReadVolume(this.layout, key));
    });
  }

  /** A copy: the caller gets nothing it could change the index through. */
  private toVolume(record: StoredRecord): VolumeRecord {
    const source = record.contentSource === undefined ? {} : { contentSource: { ...record.contentSource } };
    return { ...record, parameters: { ...record.parameters }, ...source, path: this.dataPath(record.key) };
  }

  private toSnapshot(record: StoredSnapshot): SnapshotRecord {
    return { ...record, path: this.snapshotDataPath(record.key) };
  }

  private async openPool(fresh?: NewIdentity): Promise<OpenReport> {
    await fs.mkdir(this.layout.root, { recursive: true });
    const lock = this.opened?.lock ?? (await acquirePoolLock(this.layout));
    try {
      const { identity, created } = await ensurePoolIdentity(this.layout, this.kind, fresh);
      await this.layout.createDirs();
      this.indexes.drop();
      // First: a workload's filesystem that a killed agent left frozen waits for nothing else.
      const thawed = (await thawFrozen(this.layout, (key) => this.copies.volumeBusy(key))).map((key) => ({
        key,
        outcome: 'thawed' as const,
        message: 'its filesystem was left frozen by a copy that did not end (the agent was killed): thawed',
      }));
      const { reconciled, strays } = await reconcilePool(this, {
        volume: (key) => this.copies.volumeBusy(key),
        snapshot: (key) => this.copies.snapshotBusy(key),
      });
      // After a reboot nothing staged is attached or mounted any more; kubelet expects it to be.
      const restaged = await restageAll(this.access);
      const repaired = [...thawed, ...restaged.repaired, ...(await this.sweep())];
      this.opened = { poolId: identity.poolId, lock };
      return { poolId: identity.poolId, created, reconciled, strays: [...strays, ...restaged.strays].sort(), repaired };
    } catch (error) {
      if (this.opened?.lock !== lock) await lock.release().catch(() => undefined);
      throw error;
    }
  }
}

function assertPageLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1) {
    throw new DriverError(FailureType.InvalidArgument, `page limit ${limit} is not a positive whole number`);
  }
}

/** Runs tasks one at a time, in call order; a failed task does not stop the ones queued behind it. */
class AsyncMutex {
  private tail: Promise<void> = Promise.resolve();
  private pending = 0;

  /** True while a task runs or waits. */
  get busy(): boolean {
    return this.pending > 0;
  }

  run<T>(task: () => Promise<T>): Promise<T> {
    this.pending++;
    const result = this.tail.then(task);
    this.tail = result.then(
      () => void this.pending--,
      () => void this.pending--,
    );
    return result;
  }
}

/** Throws InvalidArgument; runs before anything touches the filesystem. */
function assertGroupSpec(spec: unknown): asserts spec is CreateGroupSnapshotSpec {
  const { groupKey, name, members } = (spec ?? {}) as Partial<Record<keyof CreateGroupSnapshotSpec, unknown>>;
  assertSnapshotKey(groupKey);
  if (typeof name !== 'string' || name === '') {
    throw new DriverError(FailureType.InvalidArgument, 'group snapshot name must be a non-empty string');
  }
  if (!Array.isArray(members) || members.length === 0) {
    throw new DriverError(FailureType.InvalidArgument, 'a group snapshot needs at least one member volume');
  }
  for (const member of members) assertCreateSnapshotSpec({ ...(member as object), name });
  const sources = new Set(members.map((member: { sourceKey: string }) => member.sourceKey));
  const keys = new Set(members.map((member: { snapshotKey: string }) => member.snapshotKey));
  if (sources.size !== members.length || keys.size !== members.length) {
    throw new DriverError(FailureType.InvalidArgument, 'a group snapshot names each volume and each key once');
  }
}
