/**
 * What every backend shares: the pool (identity, lock, records, intent journal, reconciliation) and capacity by
 * reservation. A backend supplies how a volume is allocated, released and grown, and the node side of its volumes
 * (stage, publish, stats, whether one is in use: storage/pool/node-side.ts), which the pool calls but never imports.
 */
import { promises as fs } from 'node:fs';
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import type {
  BackendCapabilities,
  CreateSnapshotSpec,
  CreateVolumeSpec,
  ExpandResult,
  OpenReport,
  PoolStatus,
  PublishOptions,
  StageOptions,
  SnapshotRecord,
  StorageBackend,
  VolumePage,
  VolumeRecord,
  VolumeStats,
} from './backend';
import { AsyncMutex } from './async-mutex';
import { fsyncDir } from '../host/atomic-file';
import { removeIntent, writeIntent } from './journal';
import type { Intent } from './journal';
import { ensurePoolIdentity, readIdentity } from './pool-identity';
import type { NewIdentity, PoolIdentity } from './pool-identity';
import { PoolLayout, assertSnapshotKey, assertVolumeKey } from './pool-layout';
import type { NodeSide } from './node-side';
import { acquirePoolLock } from './pool-lock';
import type { PoolLock } from './pool-lock';
import { RecordIndex } from './record-index';
import { reconcilePool, settleIntent, settleJournal } from './reconcile';
import type { Reconciled, Release } from './reconcile';
import {
  SnapshotIndex,
  assertCreateSnapshotSpec,
  makeSnapshotDir,
  readSnapshot,
  settleSnapshotIntent,
  settleSnapshotJournal,
  shapeOf,
  snapshotDirExists,
  writeSnapshot,
  writeSnapshotIntent,
} from './snapshots';
import type { SnapshotIntent, StoredSnapshot } from './snapshots';
import { assertCompatible, describeSize } from './volume-compat';
import type { VolumeShape } from './volume-compat';
import { makeVolumeDir, volumeDirExists } from './volume-dirs';
import { readRecord, writeRecord } from './volume-records';
import type { StoredRecord } from './volume-records';
import { assertCreateVolumeSpec, describeSource, isSize } from './volume-spec';

export interface PoolBackendOptions {
  /** Absolute path of the pool directory; created if missing. */
  pool: string;
  capacityBytes: number;
}

interface OpenPool {
  poolId: string;
  lock: PoolLock;
}

type Repaired = OpenReport['repaired'];

/**
 * Where a restored or cloned volume's data comes from: `path` is the snapshot's copy or the source volume's data;
 * `volume` is set for a clone (a volume the node may have staged: loop freezes its filesystem while copying).
 */
export interface CopyOrigin {
  path: string;
  volume?: StoredRecord;
}

/** The shape a restore or clone must match: the source's access type and filesystem. */
type SourceShape = Pick<StoredRecord, 'accessType' | 'fsType'>;

export abstract class PoolBackend implements StorageBackend {
  abstract readonly kind: string;
  abstract readonly capabilities: BackendCapabilities;
  protected readonly layout: PoolLayout;
  protected readonly capacityBytes: number;
  /** Every call, reads included, runs alone: each sees a settled journal and a consistent pool. */
  private readonly mutex = new AsyncMutex();
  private opened: OpenPool | undefined;
  /** Read from disk on first use after open(); dropped whenever a change to the pool fails part way. */
  private index: RecordIndex | undefined;
  /** Like `index`, for snapshots. */
  private snapshotIndex: SnapshotIndex | undefined;
  /** The last figures status() read, answered while another call holds the pool. */
  private lastStatus: PoolStatus | undefined;
  private readonly releaser: Release = (_layout, key) => this.release(key);

  constructor(options: PoolBackendOptions) {
    this.layout = new PoolLayout(options.pool);
    if (!isSize(options.capacityBytes)) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `pool capacity ${String(options.capacityBytes)} is not a whole number of bytes >= 0`,
      );
    }
    this.capacityBytes = options.capacityBytes;
  }

  /** The node side of the backend's volumes (storage/node/node-volumes.ts over its volume access). */
  protected abstract readonly node: NodeSide;
  /** Checks and completes what a create asks for beyond the common fields; runs before anything is touched. */
  protected abstract shapeOf(spec: CreateVolumeSpec): VolumeShape;
  /** The volume's data inside the pool (VolumeRecord.path). */
  protected abstract dataPath(key: string): string;
  /**
   * Fills the freshly made volume directory, from `origin` for a restore or clone (its capacity already checked to
   * be at least the source's); the record is written only after it succeeds.
   */
  protected abstract allocate(record: StoredRecord, origin?: CopyOrigin): Promise<void>;
  /** A snapshot's copy inside the pool (SnapshotRecord.path): dir: its directory; loop: its image file. */
  protected abstract snapshotDataPath(key: string): string;
  /** Copies the volume's data to `target` (snapshotDataPath of the new snapshot, whose directory exists). */
  protected abstract copyToSnapshot(source: StoredRecord, target: string): Promise<void>;
  /** Frees everything the volume holds in the pool; used by delete and by rolling back a create. Idempotent. */
  protected abstract release(key: string): Promise<void>;
  /** Makes the volume's storage (not its record) capacityBytes large. Idempotent. */
  protected abstract grow(record: StoredRecord, capacityBytes: number): Promise<void>;
  protected abstract needsNodeExpansion(record: StoredRecord): boolean;
  /** NodeExpandVolume: checks volumePath shows the volume, grows device and filesystem, returns the capacity. */
  protected abstract growFilesystem(record: StoredRecord, volumePath: string): Promise<number>;

  /** What a volume of this capacity takes from the pool. */
  protected allocatedBytes(capacityBytes: number): number {
    return capacityBytes;
  }

  /**
   * Refuses (ResourceExhausted) when the pool's storage cannot hold `bytes` more, whatever is reserved; `what` names
   * it for the message (`volume "pvc-1"`).
   */
  protected async checkSpace(_bytes: number, _what: string): Promise<void> {}

  /**
   * What a new volume is given besides its spec, before its intent is written (dir with quotas: a project ID,
   * journaled so that a crash part way can undo it). `existing` are the pool's records.
   */
  protected async volumeIds(_key: string, _existing: StoredRecord[]): Promise<Pick<StoredRecord, 'projectId'>> {
    return {};
  }

  /** At open, after restaging: undoes what no staging record explains (loop: stray attached devices). */
  protected async sweep(): Promise<Repaired> {
    return [];
  }

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
      this.index = undefined;
      this.lastStatus = undefined;
      await opened?.lock.release();
    });
  }

  /**
   * While another call holds the pool (a snapshot, restore or clone copies a whole volume, for minutes without
   * reflinks), the last figures are answered at once: the presence heartbeat reads them every 10 s, and waiting for
   * the copy would make a busy node look offline. They are at most one call old.
   */
  async status(): Promise<PoolStatus> {
    if (this.mutex.busy && this.lastStatus && this.opened) return { ...this.lastStatus };
    this.lastStatus = await this.freshStatus();
    return { ...this.lastStatus };
  }

  private freshStatus(): Promise<PoolStatus> {
    return this.whenOpen(async ({ poolId }) => {
      const { size } = await this.records();
      const snapshots = await this.snapshots();
      const reservedBytes = await this.reservedBytes();
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
    return this.whenOpen(() => this.create(spec, shape));
  }

  async deleteVolume(key: string): Promise<{ existed: boolean }> {
    assertVolumeKey(key);
    return this.whenOpen(() => this.delete(key));
  }

  async getVolume(key: string): Promise<VolumeRecord | undefined> {
    assertVolumeKey(key);
    return this.whenOpen(async () => {
      const record = await readRecord(this.layout, key);
      return record && this.toVolume(record);
    });
  }

  listVolumes(): Promise<VolumeRecord[]> {
    return this.whenOpen(async () => (await this.records()).all().map((record) => this.toVolume(record)));
  }

  async listVolumePage(afterKey: string | undefined, limit: number): Promise<VolumePage> {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new DriverError(FailureType.InvalidArgument, `page limit ${limit} is not a positive whole number`);
    }
    return this.whenOpen(async () => {
      const { records, more } = (await this.records()).page(afterKey, limit);
      return { volumes: records.map((record) => this.toVolume(record)), more };
    });
  }

  async expandVolume(key: string, capacityBytes: number): Promise<ExpandResult> {
    assertVolumeKey(key);
    if (!isSize(capacityBytes)) {
      throw new DriverError(FailureType.InvalidArgument, `capacity ${capacityBytes} is not a whole number of bytes`);
    }
    return this.whenOpen(() => this.expand(key, capacityBytes));
  }

  async createSnapshot(spec: CreateSnapshotSpec): Promise<SnapshotRecord> {
    assertCreateSnapshotSpec(spec);
    return this.whenOpen(() => this.snapshot(spec));
  }

  async deleteSnapshot(key: string): Promise<'deleted' | 'absent'> {
    assertSnapshotKey(key);
    return this.whenOpen(() => this.removeSnapshot(key));
  }

  async getSnapshot(key: string): Promise<SnapshotRecord | undefined> {
    assertSnapshotKey(key);
    return this.whenOpen(async () => {
      const record = await readSnapshot(this.layout, key);
      return record && this.toSnapshot(record);
    });
  }

  listSnapshots(): Promise<SnapshotRecord[]> {
    return this.whenOpen(async () => (await this.snapshots()).all().map((record) => this.toSnapshot(record)));
  }

  stageVolume(key: string, stagingPath: string, options: StageOptions): Promise<void> {
    return this.withVolume(key, (record) => this.node.stage(record, stagingPath, options));
  }

  unstageVolume(key: string, stagingPath: string): Promise<void> {
    return this.withVolume(key, (record) => this.node.unstage(record, stagingPath));
  }

  publishVolume(key: string, stagingPath: string, targetPath: string, options: PublishOptions): Promise<void> {
    return this.withVolume(key, (record) => this.node.publish(record, stagingPath, targetPath, options));
  }

  unpublishVolume(key: string, targetPath: string): Promise<void> {
    return this.withVolume(key, (record) => this.node.unpublish(record, targetPath));
  }

  volumeStats(key: string, volumePath: string): Promise<VolumeStats> {
    return this.withVolume(key, (record) => this.node.stats(record, this.dataPath(key), volumePath));
  }

  expandFilesystem(key: string, volumePath: string): Promise<{ capacityBytes: number }> {
    return this.withVolume(key, async (record) => ({ capacityBytes: await this.growFilesystem(record, volumePath) }));
  }

  private async records(): Promise<RecordIndex> {
    this.index ??= await RecordIndex.load(this.layout, (capacity) => this.allocatedBytes(capacity));
    return this.index;
  }

  private async snapshots(): Promise<SnapshotIndex> {
    this.snapshotIndex ??= await SnapshotIndex.load(this.layout, (size) => this.allocatedBytes(size));
    return this.snapshotIndex;
  }

  /** Volumes, snapshots and the creates of either still in the journals. */
  private async reservedBytes(): Promise<number> {
    return (await this.records()).reservedBytes + (await this.snapshots()).reservedBytes;
  }

  /** Runs a step that changes the pool on disk: should it fail part way, the indexes are read again next time. */
  private async changing<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      this.index = undefined;
      this.snapshotIndex = undefined;
      throw error;
    }
  }

  /** Settles what earlier calls left in the journals; anything settled changed records, so the indexes are reread. */
  private async settle(): Promise<{ reconciled: Reconciled[]; strays: string[] }> {
    const volumes = await this.changing(() => settleJournal(this.layout, this.releaser));
    const snapshots = await this.changing(() => settleSnapshotJournal(this.layout));
    if (volumes.reconciled.length > 0) this.index = undefined;
    if (snapshots.reconciled.length > 0) this.snapshotIndex = undefined;
    return {
      reconciled: [...volumes.reconciled, ...snapshots.reconciled],
      strays: [...volumes.strays, ...snapshots.strays],
    };
  }

  /** A copy: the caller gets nothing it could change the index through. */
  private toVolume(record: StoredRecord): VolumeRecord {
    const source = record.contentSource === undefined ? {} : { contentSource: { ...record.contentSource } };
    return { ...record, parameters: { ...record.parameters }, ...source, path: this.dataPath(record.key) };
  }

  private toSnapshot(record: StoredSnapshot): SnapshotRecord {
    return { ...record, path: this.snapshotDataPath(record.key) };
  }

  private whenOpen<T>(task: (opened: OpenPool) => Promise<T>): Promise<T> {
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

  /** Runs a node call on an existing volume; NotFound when the pool does not hold it. */
  private withVolume<T>(key: string, task: (record: StoredRecord) => Promise<T>): Promise<T> {
    assertVolumeKey(key);
    return this.whenOpen(async () => task(await this.mustRead(key)));
  }

  private async mustRead(key: string): Promise<StoredRecord> {
    const record = await readRecord(this.layout, key);
    if (!record)
      throw new DriverError(FailureType.NotFound, `volume ${key} does not exist in pool ${this.layout.root}`);
    return record;
  }

  private async openPool(fresh?: NewIdentity): Promise<OpenReport> {
    await fs.mkdir(this.layout.root, { recursive: true });
    const lock = this.opened?.lock ?? (await acquirePoolLock(this.layout));
    try {
      const { identity, created } = await ensurePoolIdentity(this.layout, this.kind, fresh);
      const { volumesDir, recordsDir, journalDir, stagingDir, snapshotsDir } = this.layout;
      for (const dir of [volumesDir, recordsDir, journalDir, stagingDir]) await fs.mkdir(dir, { recursive: true });
      const { snapshotDataDir, snapshotRecordsDir, snapshotJournalDir } = this.layout;
      for (const dir of [snapshotDataDir, snapshotRecordsDir, snapshotJournalDir]) {
        await fs.mkdir(dir, { recursive: true });
      }
      await fsyncDir(snapshotsDir);
      await fsyncDir(this.layout.root);
      this.index = undefined;
      this.snapshotIndex = undefined;
      const { reconciled, strays } = await reconcilePool(this.layout, this.releaser);
      // After a reboot nothing staged is attached or mounted any more; kubelet expects it to be.
      const restaged = await this.node.restageAll();
      const repaired = [...restaged.repaired, ...(await this.sweep())];
      this.opened = { poolId: identity.poolId, lock };
      return { poolId: identity.poolId, created, reconciled, strays: [...strays, ...restaged.strays].sort(), repaired };
    } catch (error) {
      if (this.opened?.lock !== lock) await lock.release().catch(() => undefined);
      throw error;
    }
  }

  private async create(spec: CreateVolumeSpec, requestedShape: VolumeShape): Promise<VolumeRecord> {
    // Leftovers of a call that failed part way; from here on the journal is empty.
    await this.settle();
    const records = await this.records();
    const existing = records.get(spec.key) ?? records.byName(spec.name);
    if (existing) return this.toVolume(assertCompatible(existing, spec, adoptFsType(requestedShape, spec, existing)));
    const origin = spec.contentSource && (await this.originOf(spec, requestedShape));
    const shape = origin?.shape ?? requestedShape;
    if (await volumeDirExists(this.layout, spec.key)) {
      // A stray: its content is unknown, so it is neither adopted nor removed.
      throw new DriverError(
        FailureType.FailedPrecondition,
        `${this.layout.volumeDir(spec.key)} exists without a record; remove it by hand to reuse key ${spec.key}`,
      );
    }
    await this.assertRoom(this.allocatedBytes(spec.capacityBytes), `volume "${spec.name}"`);
    const { key, name, capacityBytes } = spec;
    const parameters = { ...spec.parameters };
    const ids = await this.volumeIds(key, records.all());
    const intent: Intent = { op: 'create', key, name, capacityBytes, parameters, at: new Date().toISOString(), ...ids };
    const source = spec.contentSource === undefined ? {} : { contentSource: { ...spec.contentSource } };
    const createdAt = intent.at;
    const record: StoredRecord = { key, name, capacityBytes, parameters, createdAt, ...shape, ...ids, ...source };
    await this.changing(async () => {
      await writeIntent(this.layout, intent);
      try {
        await makeVolumeDir(this.layout, key);
        await this.allocate(record, origin?.copy);
        await writeRecord(this.layout, record);
        await removeIntent(this.layout, key);
      } catch (error) {
        // Leave nothing half made; should that fail too, the intent stays for the next call or open().
        await settleIntent(this.layout, intent, this.releaser).catch(() => undefined);
        throw error;
      }
    });
    records.put(record);
    return this.toVolume(record);
  }

  /**
   * The source of a restore or clone: NotFound when the pool does not hold it, OutOfRange when the requested
   * capacity is below its size, InvalidArgument when the request's access type or filesystem differ from its own
   * (an fsType left empty takes the source's).
   */
  private async originOf(
    spec: CreateVolumeSpec,
    requested: VolumeShape,
  ): Promise<{ copy: CopyOrigin; shape: VolumeShape }> {
    const source = spec.contentSource!;
    let copy: CopyOrigin;
    let sizeBytes: number;
    let own: SourceShape;
    if ('snapshotKey' in source) {
      const snapshot = await readSnapshot(this.layout, source.snapshotKey);
      if (!snapshot) {
        throw new DriverError(
          FailureType.NotFound,
          `snapshot ${source.snapshotKey} does not exist in pool ${this.layout.root}`,
        );
      }
      copy = { path: this.snapshotDataPath(snapshot.key) };
      ({ sizeBytes } = snapshot);
      own = snapshot;
    } else {
      const volume = await readRecord(this.layout, source.volumeKey);
      if (!volume) {
        throw new DriverError(
          FailureType.NotFound,
          `volume ${source.volumeKey} (the source to clone) does not exist in pool ${this.layout.root}`,
        );
      }
      copy = { path: this.dataPath(volume.key), volume };
      sizeBytes = volume.capacityBytes;
      own = volume;
    }
    if (spec.capacityBytes < sizeBytes) {
      throw new DriverError(
        FailureType.OutOfRange,
        `volume "${spec.name}" asks for ${describeSize(spec.capacityBytes)}, less than the ` +
          `${describeSize(sizeBytes)} of its source (${describeSource(source)}); ask for at least that much`,
      );
    }
    const shape = adoptFsType(requested, spec, own);
    for (const field of ['accessType', 'fsType'] as const) {
      if ((shape[field] ?? 'none') !== (own[field] ?? 'none')) {
        throw new DriverError(
          FailureType.InvalidArgument,
          `${describeSource(source)} holds ${field} ${own[field] ?? 'none'}; volume "${spec.name}" asks for ` +
            `${shape[field] ?? 'none'}, and a restore or clone keeps its source's`,
        );
      }
    }
    return { copy, shape };
  }

  private async snapshot(spec: CreateSnapshotSpec): Promise<SnapshotRecord> {
    await this.settle();
    const snapshots = await this.snapshots();
    const { snapshotKey: key, sourceKey, name } = spec;
    const existing = snapshots.get(key) ?? snapshots.byName(name);
    if (existing) {
      if (existing.key === key && existing.sourceKey === sourceKey && existing.name === name) {
        return this.toSnapshot(existing);
      }
      throw new DriverError(
        FailureType.AlreadyExists,
        `snapshot "${existing.name}" (key ${existing.key}) already exists, of volume ${existing.sourceKey}; ` +
          `requested "${name}" (key ${key}) of volume ${sourceKey}`,
      );
    }
    const source = await readRecord(this.layout, sourceKey);
    if (!source) {
      throw new DriverError(FailureType.NotFound, `volume ${sourceKey} does not exist in pool ${this.layout.root}`);
    }
    if (await snapshotDirExists(this.layout, key)) {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `${this.layout.snapshotDir(key)} exists without a record; remove it by hand to reuse snapshot key ${key}`,
      );
    }
    await this.assertRoom(this.allocatedBytes(source.capacityBytes), `snapshot "${name}" of volume "${source.name}"`);
    const at = new Date().toISOString();
    const intent: SnapshotIntent = { op: 'create', key, name, sourceKey, sizeBytes: source.capacityBytes, at };
    const record: StoredSnapshot = {
      key,
      name,
      sourceKey,
      sizeBytes: source.capacityBytes,
      createdAt: at,
      ...shapeOf(source),
    };
    await this.changing(async () => {
      await writeSnapshotIntent(this.layout, intent);
      try {
        await makeSnapshotDir(this.layout, key);
        await this.copyToSnapshot(source, this.snapshotDataPath(key));
        await writeSnapshot(this.layout, record);
        await settleSnapshotIntent(this.layout, intent);
      } catch (error) {
        // Leave no partial copy; should that fail too, the intent stays for the next call or open().
        await settleSnapshotIntent(this.layout, intent).catch(() => undefined);
        throw error;
      }
    });
    snapshots.put(record);
    return this.toSnapshot(record);
  }

  private async removeSnapshot(key: string): Promise<'deleted' | 'absent'> {
    const { reconciled } = await this.settle();
    const finishedNow = reconciled.some(
      (entry) => entry.key === key && entry.op === 'snapshot-delete' && entry.outcome === 'completed',
    );
    const record = await readSnapshot(this.layout, key);
    if (!record && !(await snapshotDirExists(this.layout, key))) return finishedNow ? 'deleted' : 'absent';
    const intent: SnapshotIntent = {
      op: 'delete',
      key,
      name: record?.name ?? '',
      sourceKey: record?.sourceKey ?? '',
      sizeBytes: record?.sizeBytes ?? 0,
      at: new Date().toISOString(),
    };
    await this.changing(async () => {
      await writeSnapshotIntent(this.layout, intent);
      await settleSnapshotIntent(this.layout, intent);
    });
    this.snapshotIndex?.remove(key);
    return 'deleted';
  }

  private async delete(key: string): Promise<{ existed: boolean }> {
    const { reconciled } = await this.settle();
    // An earlier call that failed part way may just have been finished for us.
    const finishedNow = reconciled.some(
      (entry) => entry.key === key && entry.op === 'delete' && entry.outcome === 'completed',
    );
    const record = await readRecord(this.layout, key);
    if (!record && !(await volumeDirExists(this.layout, key))) return { existed: finishedNow };
    await this.node.assertNotInUse(record ?? { key });
    const intent: Intent = {
      op: 'delete',
      key,
      name: record?.name ?? '',
      capacityBytes: record?.capacityBytes ?? 0,
      parameters: record?.parameters ?? {},
      at: new Date().toISOString(),
      ...(record?.projectId === undefined ? {} : { projectId: record.projectId }),
    };
    await this.changing(async () => {
      await writeIntent(this.layout, intent);
      await settleIntent(this.layout, intent, this.releaser);
    });
    this.index?.remove(key);
    return { existed: true };
  }

  /** ResourceExhausted, nothing changed, unless both the pool's capacity and its storage have `bytes` to spare. */
  private async assertRoom(bytes: number, what: string): Promise<void> {
    const availableBytes = Math.max(0, this.capacityBytes - (await this.reservedBytes()));
    if (bytes > availableBytes) {
      throw new DriverError(
        FailureType.ResourceExhausted,
        `cannot reserve ${formatBytes(bytes)} for ${what}: ` +
          `${formatBytes(availableBytes)} of the pool's ${formatBytes(this.capacityBytes)} is available`,
      );
    }
    await this.checkSpace(bytes, what);
  }

  /** Grows the storage first and the record after: a crash in between leaves a retry to redo the growth. */
  private async expand(key: string, capacityBytes: number): Promise<ExpandResult> {
    await this.settle();
    let record = await this.mustRead(key);
    if (capacityBytes > record.capacityBytes) {
      const records = await this.records();
      const extraBytes = this.allocatedBytes(capacityBytes) - this.allocatedBytes(record.capacityBytes);
      const availableBytes = Math.max(0, this.capacityBytes - (await this.reservedBytes()));
      if (extraBytes > availableBytes) {
        throw new DriverError(
          FailureType.ResourceExhausted,
          `cannot grow volume "${record.name}" to ${formatBytes(capacityBytes)}: it needs ${formatBytes(extraBytes)} ` +
            `more and ${formatBytes(availableBytes)} of the pool's ${formatBytes(this.capacityBytes)} is available`,
        );
      }
      await this.checkSpace(extraBytes, `volume "${record.name}"`);
      const grown = { ...record, capacityBytes };
      await this.changing(async () => {
        await this.grow(record, capacityBytes);
        await writeRecord(this.layout, grown);
      });
      records.put(grown);
      record = grown;
    }
    return { capacityBytes: record.capacityBytes, nodeExpansionRequired: this.needsNodeExpansion(record) };
  }
}

/**
 * A restore or clone that names no fsType takes its source's filesystem (an existing volume's, on a retry) rather
 * than the backend's default; only on backends that format (the requested shape has an fsType).
 */
function adoptFsType(requested: VolumeShape, spec: CreateVolumeSpec, source: SourceShape): VolumeShape {
  if (!spec.contentSource || spec.fsType || requested.fsType === undefined || source.fsType === undefined) {
    return requested;
  }
  return { ...requested, fsType: source.fsType };
}
