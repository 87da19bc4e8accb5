/**
 * Creating and deleting a snapshot, journaled (snapshots.ts holds the records, the journal and how an intent is
 * settled): the intent is written before the copy is made and settled after the record is written, so a crash at
 * any point leaves what the next call or open() completes or rolls back. PoolBackend runs each call with the pool
 * held.
 */
import { DriverError, FailureType } from '../../common/failures';
import type { CreateSnapshotSpec } from './backend';
import type { PoolIndexes } from './pool-indexes';
import type { PoolLayout } from './pool-layout';
import {
  makeSnapshotDir,
  readSnapshot,
  settleSnapshotIntent,
  shapeOf,
  snapshotDirExists,
  writeSnapshot,
  writeSnapshotIntent,
} from './snapshots';
import type { SnapshotIntent, StoredSnapshot } from './snapshots';
import { readRecord } from './volume-records';
import type { StoredRecord } from './volume-records';

/** What snapshot work asks of the pool it runs in; PoolBackend hands over its own. */
export interface SnapshotPool {
  readonly layout: PoolLayout;
  readonly indexes: PoolIndexes;
  /** What a copy of a volume of this capacity takes from the pool. */
  allocatedBytes(capacityBytes: number): number;
  /** ResourceExhausted, nothing changed, unless the pool has `bytes` to spare. */
  assertRoom(bytes: number, what: string): Promise<void>;
  /** A snapshot's copy inside the pool (SnapshotRecord.path). */
  snapshotDataPath(key: string): string;
  /** Copies the volume's data to `target` (snapshotDataPath of the new snapshot, whose directory exists). */
  copyToSnapshot(source: StoredRecord, target: string): Promise<void>;
}

/**
 * Idempotent by key and by name: an existing snapshot of the same key, name and source is answered as it is; one
 * that shares only the key or the name is AlreadyExists.
 */
export async function createSnapshot(pool: SnapshotPool, spec: CreateSnapshotSpec): Promise<StoredSnapshot> {
  const { layout, indexes } = pool;
  await indexes.settle();
  const snapshots = await indexes.snapshots();
  const { snapshotKey: key, sourceKey, name } = spec;
  const existing = snapshots.get(key) ?? snapshots.byName(name);
  if (existing) {
    if (existing.key === key && existing.sourceKey === sourceKey && existing.name === name) return existing;
    throw new DriverError(
      FailureType.AlreadyExists,
      `snapshot "${existing.name}" (key ${existing.key}) already exists, of volume ${existing.sourceKey}; ` +
        `requested "${name}" (key ${key}) of volume ${sourceKey}`,
    );
  }
  const source = await readRecord(layout, sourceKey);
  if (!source) {
    throw new DriverError(FailureType.NotFound, `volume ${sourceKey} does not exist in pool ${layout.root}`);
  }
  if (await snapshotDirExists(layout, key)) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `${layout.snapshotDir(key)} exists without a record; remove it by hand to reuse snapshot key ${key}`,
    );
  }
  await pool.assertRoom(pool.allocatedBytes(source.capacityBytes), `snapshot "${name}" of volume "${source.name}"`);
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
  await indexes.changing(async () => {
    await writeSnapshotIntent(layout, intent);
    try {
      await makeSnapshotDir(layout, key);
      await pool.copyToSnapshot(source, pool.snapshotDataPath(key));
      await writeSnapshot(layout, record);
      await settleSnapshotIntent(layout, intent);
    } catch (error) {
      // Leave no partial copy; should that fail too, the intent stays for the next call or open().
      await settleSnapshotIntent(layout, intent).catch(() => undefined);
      throw error;
    }
  });
  snapshots.put(record);
  return record;
}

/** 'deleted' also when an earlier call that failed part way was just finished by settling the journal. */
export async function deleteSnapshot(pool: SnapshotPool, key: string): Promise<'deleted' | 'absent'> {
  const { layout, indexes } = pool;
  const { reconciled } = await indexes.settle();
  const finishedNow = reconciled.some(
    (entry) => entry.key === key && entry.op === 'snapshot-delete' && entry.outcome === 'completed',
  );
  const record = await readSnapshot(layout, key);
  if (!record && !(await snapshotDirExists(layout, key))) return finishedNow ? 'deleted' : 'absent';
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
