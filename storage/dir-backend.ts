/**
 * The dir backend: one directory per volume inside a pool directory. Capacity is a reservation (the sum of the
 * volumes' sizes must fit the pool's), not a quota: nothing stops a user writing more than a volume's size.
 */
import { promises as fs } from 'node:fs';
import { DriverError, FailureType } from '../common/failures';
import { formatBytes } from '../common/quantity';
import type { CreateVolumeSpec, OpenReport, PoolStatus, StorageBackend, VolumeRecord } from './backend';
import { AsyncMutex } from './async-mutex';
import { fsyncDir } from './atomic-file';
import { listIntents, removeIntent, writeIntent } from './journal';
import type { Intent } from './journal';
import { ensurePoolIdentity } from './pool-identity';
import { PoolLayout, assertVolumeKey } from './pool-layout';
import { acquirePoolLock } from './pool-lock';
import type { PoolLock } from './pool-lock';
import { reconcilePool, settleIntent, settleJournal } from './reconcile';
import { makeVolumeDir, volumeDirExists } from './volume-dirs';
import { listRecords, readRecord, withPath, writeRecord } from './volume-records';
import type { StoredRecord } from './volume-records';
import { assertCreateVolumeSpec, isSize, sameParameters } from './volume-spec';

export interface DirBackendOptions {
  /** Absolute path of the pool directory; created if missing. */
  pool: string;
  capacityBytes: number;
}

interface OpenPool {
  poolId: string;
  lock: PoolLock;
}

export class DirBackend implements StorageBackend {
  readonly kind = 'dir';
  private readonly layout: PoolLayout;
  private readonly capacityBytes: number;
  /** Every call, reads included, runs alone: each sees a settled journal and a consistent pool. */
  private readonly mutex = new AsyncMutex();
  private opened: OpenPool | undefined;

  constructor(options: DirBackendOptions) {
    this.layout = new PoolLayout(options.pool);
    if (!isSize(options.capacityBytes)) {
      throw new DriverError(
        FailureType.InvalidArgument,
        `pool capacity ${String(options.capacityBytes)} is not a whole number of bytes >= 0`,
      );
    }
    this.capacityBytes = options.capacityBytes;
  }

  open(): Promise<OpenReport> {
    return this.mutex.run(() => this.openPool());
  }

  close(): Promise<void> {
    return this.mutex.run(async () => {
      const opened = this.opened;
      this.opened = undefined;
      await opened?.lock.release();
    });
  }

  status(): Promise<PoolStatus> {
    return this.whenOpen(async ({ poolId }) => {
      const records = await listRecords(this.layout);
      const { intents } = await listIntents(this.layout);
      const reservedBytes = reserved(records, intents);
      return {
        poolId,
        capacityBytes: this.capacityBytes,
        reservedBytes,
        availableBytes: Math.max(0, this.capacityBytes - reservedBytes),
        volumeCount: records.length,
      };
    });
  }

  async createVolume(spec: CreateVolumeSpec): Promise<VolumeRecord> {
    assertCreateVolumeSpec(spec);
    return this.whenOpen(() => this.create(spec));
  }

  async deleteVolume(key: string): Promise<{ existed: boolean }> {
    assertVolumeKey(key);
    return this.whenOpen(() => this.delete(key));
  }

  async getVolume(key: string): Promise<VolumeRecord | undefined> {
    assertVolumeKey(key);
    return this.whenOpen(async () => {
      const record = await readRecord(this.layout, key);
      return record && withPath(this.layout, record);
    });
  }

  listVolumes(): Promise<VolumeRecord[]> {
    return this.whenOpen(async () => (await listRecords(this.layout)).map((record) => withPath(this.layout, record)));
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

  private async openPool(): Promise<OpenReport> {
    await fs.mkdir(this.layout.root, { recursive: true });
    const lock = this.opened?.lock ?? (await acquirePoolLock(this.layout));
    try {
      const { identity, created } = await ensurePoolIdentity(this.layout, this.kind);
      for (const dir of [this.layout.volumesDir, this.layout.recordsDir, this.layout.journalDir]) {
        await fs.mkdir(dir, { recursive: true });
      }
      await fsyncDir(this.layout.root);
      const { reconciled, strays } = await reconcilePool(this.layout);
      this.opened = { poolId: identity.poolId, lock };
      return { poolId: identity.poolId, created, reconciled, strays };
    } catch (error) {
      if (this.opened?.lock !== lock) await lock.release().catch(() => undefined);
      throw error;
    }
  }

  private async create(spec: CreateVolumeSpec): Promise<VolumeRecord> {
    // Leftovers of a call that failed part way; from here on the journal is empty.
    await settleJournal(this.layout);
    const records = await listRecords(this.layout);
    const existing = records.find((record) => record.key === spec.key) ?? records.find((r) => r.name === spec.name);
    if (existing) return withPath(this.layout, assertCompatible(existing, spec));
    if (await volumeDirExists(this.layout, spec.key)) {
      // A stray: its content is unknown, so it is neither adopted nor removed.
      throw new DriverError(
        FailureType.FailedPrecondition,
        `${this.layout.volumeDir(spec.key)} exists without a record; remove it by hand to reuse key ${spec.key}`,
      );
    }
    const availableBytes = Math.max(0, this.capacityBytes - reserved(records, []));
    if (spec.capacityBytes > availableBytes) {
      throw new DriverError(
        FailureType.ResourceExhausted,
        `cannot reserve ${formatBytes(spec.capacityBytes)} for volume "${spec.name}": ` +
          `${formatBytes(availableBytes)} of the pool's ${formatBytes(this.capacityBytes)} is available`,
      );
    }
    const { key, name, capacityBytes } = spec;
    const parameters = { ...spec.parameters };
    const intent: Intent = { op: 'create', key, name, capacityBytes, parameters, at: new Date().toISOString() };
    const record: StoredRecord = { key, name, capacityBytes, parameters, createdAt: intent.at };
    await writeIntent(this.layout, intent);
    try {
      await makeVolumeDir(this.layout, key);
      await writeRecord(this.layout, record);
      await removeIntent(this.layout, key);
    } catch (error) {
      // Leave nothing half made; should that fail too, the intent stays for the next call or open().
      await settleIntent(this.layout, intent).catch(() => undefined);
      throw error;
    }
    return withPath(this.layout, record);
  }

  private async delete(key: string): Promise<{ existed: boolean }> {
    const { reconciled } = await settleJournal(this.layout);
    // An earlier call that failed part way may just have been finished for us.
    const finishedNow = reconciled.some((entry) => entry.key === key && entry.outcome === 'completed');
    const record = await readRecord(this.layout, key);
    if (!record && !(await volumeDirExists(this.layout, key))) return { existed: finishedNow };
    const intent: Intent = {
      op: 'delete',
      key,
      name: record?.name ?? '',
      capacityBytes: record?.capacityBytes ?? 0,
      parameters: record?.parameters ?? {},
      at: new Date().toISOString(),
    };
    await writeIntent(this.layout, intent);
    await settleIntent(this.layout, intent);
    return { existed: true };
  }
}

/** Volumes plus creates still in the journal (a create that has written its record is counted once). */
function reserved(records: StoredRecord[], intents: Intent[]): number {
  const keys = new Set(records.map((record) => record.key));
  const pending = intents.filter((intent) => intent.op === 'create' && !keys.has(intent.key));
  return [...records, ...pending].reduce((sum, entry) => sum + entry.capacityBytes, 0);
}

/** Same key: name and size must match. Same name under another key: size and parameters must match. */
function assertCompatible(existing: StoredRecord, spec: CreateVolumeSpec): StoredRecord {
  const sameKey = existing.key === spec.key;
  const differences: string[] = [];
  if (sameKey && existing.name !== spec.name) {
    differences.push(`name ("${existing.name}", requested "${spec.name}")`);
  }
  if (existing.capacityBytes !== spec.capacityBytes) {
    differences.push(
      `capacity (${describeSize(existing.capacityBytes)}, requested ${describeSize(spec.capacityBytes)})`,
    );
  }
  if (!sameKey && !sameParameters(existing.parameters, spec.parameters)) {
    differences.push(
      `parameters (${JSON.stringify(existing.parameters)}, requested ${JSON.stringify(spec.parameters)})`,
    );
  }
  if (differences.length === 0) return existing;
  const subject = sameKey ? `volume key ${spec.key}` : `volume "${spec.name}" (key ${existing.key})`;
  throw new DriverError(
    FailureType.AlreadyExists,
    `${subject} already exists with a different ${differences.join(' and ')}`,
  );
}

/** Human units when they are exact: a rounded "1.0Gi" would hide the byte that differs. */
function describeSize(bytes: number): string {
  const human = formatBytes(bytes);
  return human.includes('.') ? `${bytes} bytes` : human;
}
