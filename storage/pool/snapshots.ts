/**
 * Snapshots: their records, and creating and deleting one. A snapshot is journaled like a volume (journal.ts):
 * snapshots/journal/<key>.json is written before the copy is made and removed when the record
 * (snapshots/records/<key>.json) is written, so a crash part way leaves an intent that the next call or open()
 * settles: a create without a record is rolled back (its partial copy removed), one with a record is kept, a delete
 * is completed. The checks and the intent run with the pool held, the copy without it (CopiesInFlight keeps its
 * source and target from changing meanwhile), the record with the pool held again. The copy itself
 * (snapshots/data/<key>/) is made by the backend.
 */
import { promises as fs } from 'node:fs';
import { copyTimeMs } from '../../common/copy-budget';
import { DriverError, FailureType } from '../../common/failures';
import type { CreateSnapshotSpec, SnapshotRecord } from './backend';
import { createDir, jsonFields, pathExists, readJson, writeJsonAtomic } from '../host/files';
import { settleSnapshotIntent, writeSnapshotIntent, type SnapshotIntent } from './journal';
import type { PoolBackend } from './pool-backend';
import { assertSnapshotKey, assertVolumeKey, isVolumeKey, keyOfJsonFileName } from './pool-layout';
import type { PoolLayout } from './pool-layout';
import { isShape, isSize, readRecord, storedShape } from './records';
import type { StoredRecord } from './records';

/** What is stored: the path is derived from the key on every read. */
export type StoredSnapshot = Omit<SnapshotRecord, 'path'>;

/** Throws InvalidArgument; runs before anything touches the filesystem. */
export function assertCreateSnapshotSpec(spec: unknown): asserts spec is CreateSnapshotSpec {
  if (typeof spec !== 'object' || spec === null) {
    throw new DriverError(FailureType.InvalidArgument, 'a snapshot spec is required');
  }
  const { snapshotKey, sourceKey, name } = spec as Partial<Record<keyof CreateSnapshotSpec, unknown>>;
  assertSnapshotKey(snapshotKey);
  assertVolumeKey(sourceKey);
  if (typeof name !== 'string' || name === '') {
    throw new DriverError(FailureType.InvalidArgument, 'snapshot name must be a non-empty string');
  }
}

function parseSnapshot(value: unknown, key: string, file: string): StoredSnapshot {
  const record = jsonFields(value);
  const { name, sourceKey, sizeBytes, createdAt } = record;
  const shape = { accessType: record.accessType, fsType: record.fsType };
  if (
    record.key !== key ||
    typeof name !== 'string' ||
    !isVolumeKey(sourceKey) ||
    !isSize(sizeBytes) ||
    typeof createdAt !== 'string' ||
    !isShape(shape)
  ) {
    throw new DriverError(FailureType.Internal, `${file} is not a snapshot record for key ${key}`);
  }
  return { key, name, sourceKey, sizeBytes, createdAt, ...storedShape(shape) };
}

export async function readSnapshot(layout: PoolLayout, key: string): Promise<StoredSnapshot | undefined> {
  const file = layout.snapshotRecordFile(key);
  const value = await readJson(file);
  return value === undefined ? undefined : parseSnapshot(value, key, file);
}

export async function writeSnapshot(layout: PoolLayout, record: StoredSnapshot): Promise<void> {
  const { key, name, sourceKey, sizeBytes, createdAt } = record;
  await writeJsonAtomic(layout.snapshotRecordFile(key), {
    key,
    name,
    sourceKey,
    sizeBytes,
    createdAt,
    ...storedShape(record),
  });
}

/** Sorted by key; names in snapshots/records/ that are not records are ignored (open() reports them). */
export async function listSnapshotRecords(layout: PoolLayout): Promise<StoredSnapshot[]> {
  const keys = (await fs.readdir(layout.snapshotRecordsDir)).flatMap((name) => keyOfJsonFileName(name) ?? []).sort();
  const records: StoredSnapshot[] = [];
  for (const key of keys) {
    const record = await readSnapshot(layout, key);
    if (record) records.push(record);
  }
  return records;
}

/* Creating and deleting a snapshot. */

/** A copy journaled and marked in flight, to be made without the pool held. */
interface SnapshotCopy {
  intent: SnapshotIntent;
  record: StoredSnapshot;
  source: StoredRecord;
  /** Ends the copy's time in flight: once recorded or rolled back. */
  done: () => void;
}

/**
 * Idempotent by key and by name: an existing snapshot of the same key, name and source is answered as it is; one
 * that shares only the key or the name is AlreadyExists. While an earlier attempt still copies this key (or the
 * source is in another copy), Aborted: the caller retries.
 */
export async function createSnapshot(pool: PoolBackend, spec: CreateSnapshotSpec): Promise<StoredSnapshot> {
  const begun = await pool.locked(() => beginSnapshot(pool, spec));
  if (!('intent' in begun)) return begun;
  const { intent, record, source, done } = begun;
  const { layout, indexes } = pool;
  await pool.copies.finish(done, {
    make: async () => {
      const budgetMs = copyTimeMs(pool.allocatedBytes(source.capacityBytes), pool.copyBudget);
      await pool.copyToSnapshot(source, pool.snapshotDataPath(record.key), budgetMs);
    },
    record: async () => {
      await writeSnapshot(layout, record);
      await settleSnapshotIntent(layout, intent);
      (await indexes.snapshots()).put(record);
    },
    // Leaves no partial copy.
    rollBack: () => settleSnapshotIntent(layout, intent),
  });
  return record;
}

/** The checks and the intent, with the pool held: the existing snapshot, or the copy to make. */
async function beginSnapshot(pool: PoolBackend, spec: CreateSnapshotSpec): Promise<StoredSnapshot | SnapshotCopy> {
  const { layout, indexes, copies } = pool;
  const { snapshotKey: key, sourceKey, name } = spec;
  await indexes.settle();
  const snapshots = await indexes.snapshots();
  const existing = snapshots.get(key) ?? snapshots.byName(name);
  if (existing) {
    if (existing.key === key && existing.sourceKey === sourceKey && existing.name === name) return existing;
    throw new DriverError(
      FailureType.AlreadyExists,
      `snapshot "${existing.name}" (key ${existing.key}) already exists, of volume ${existing.sourceKey}; ` +
        `requested "${name}" (key ${key}) of volume ${sourceKey}`,
    );
  }
  // Not recorded yet, but maybe being copied by an earlier attempt.
  copies.assertSnapshotFree(key, `create snapshot "${name}"`, name);
  const source = await readRecord(layout, sourceKey);
  if (!source) {
    throw new DriverError(FailureType.NotFound, `volume ${sourceKey} does not exist in pool ${layout.root}`);
  }
  copies.assertVolumeFree(sourceKey, `snapshot volume ${sourceKey} as "${name}"`);
  if (await pathExists(layout.snapshotDir(key))) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `${layout.snapshotDir(key)} exists without a record; remove it by hand to reuse snapshot key ${key}`,
    );
  }
  const reservedBytes = pool.allocatedBytes(source.capacityBytes);
  await pool.assertRoom(reservedBytes, `snapshot "${name}" of volume "${source.name}"`);
  const at = new Date().toISOString();
  const intent: SnapshotIntent = { op: 'create', key, name, sourceKey, sizeBytes: source.capacityBytes, at };
  const record: StoredSnapshot = {
    key,
    name,
    sourceKey,
    sizeBytes: source.capacityBytes,
    createdAt: at,
    ...storedShape(source),
  };
  await indexes.changing(async () => {
    await writeSnapshotIntent(layout, intent);
    try {
      await createDir(layout.snapshotDir(key));
    } catch (error) {
      await settleSnapshotIntent(layout, intent).catch(() => undefined);
      throw error;
    }
  });
  const done = copies.begin({
    source: { volumeKey: sourceKey },
    target: { snapshotKey: key, name },
    reservedBytes,
  });
  return { intent, record, source, done };
}

/** 'deleted' also when an earlier call that failed part way was just finished by settling the journal. */
export async function deleteSnapshot(pool: PoolBackend, key: string): Promise<'deleted' | 'absent'> {
  const { layout, indexes } = pool;
  pool.copies.assertSnapshotFree(key, `delete snapshot ${key}`);
  const { reconciled } = await indexes.settle();
  const finishedNow = reconciled.some(
    (entry) => entry.key === key && entry.op === 'snapshot-delete' && entry.outcome === 'completed',
  );
  const record = await readSnapshot(layout, key);
  if (!record && !(await pathExists(layout.snapshotDir(key)))) return finishedNow ? 'deleted' : 'absent';
  const intent: SnapshotIntent = {
    op: 'delete',
    key,
    name: record?.name ?? '',
    sourceKey: record?.sourceKey ?? '',
    sizeBytes: record?.sizeBytes ?? 0,
    at: new Date().toISOString(),
  };
  await indexes.changing(async () => {
    await writeSnapshotIntent(layout, intent);
    await settleSnapshotIntent(layout, intent);
  });
  indexes.removeSnapshot(key);
  return 'deleted';
}
