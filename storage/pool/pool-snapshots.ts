/**
 * Creating and deleting a snapshot, journaled (snapshots.ts holds the records, the journal and how an intent is
 * settled): the intent is written before the copy is made and settled after the record is written, so a crash at
 * any point leaves what the next call or open() completes or rolls back. The checks and the intent run with the
 * pool held, the copy without it (copies-in-flight.ts keeps its source and target from changing meanwhile), the
 * record with the pool held again.
 */
import { DriverError, FailureType } from '../../common/failures';
import type { CreateSnapshotSpec } from './backend';
import { createDir, pathExists } from '../host/files';
import type { CopiesInFlight, PoolIndexes } from './pool-indexes';
import type { PoolLayout } from './pool-layout';
import { readSnapshot, settleSnapshotIntent, shapeOf, writeSnapshot, writeSnapshotIntent } from './snapshots';
import type { SnapshotIntent, StoredSnapshot } from './snapshots';
import { readRecord } from './records';
import type { StoredRecord } from './records';

/** What snapshot work asks of the pool it runs in; PoolBackend hands over its own. */
export interface SnapshotPool {
  readonly layout: PoolLayout;
  readonly indexes: PoolIndexes;
  readonly copies: CopiesInFlight;
  /** What a copy of a volume of this capacity takes from the pool. */
  allocatedBytes(capacityBytes: number): number;
  /** ResourceExhausted, nothing changed, unless the pool has `bytes` to spare. */
  assertRoom(bytes: number, what: string): Promise<void>;
  /** A snapshot's copy inside the pool (SnapshotRecord.path). */
  snapshotDataPath(key: string): string;
  /** How long a copy of this many bytes may take (common/copy-budget.ts at the node's rate). */
  copyTimeMs(bytes: number): number;
  /** Copies the volume's data to `target` (snapshotDataPath of the new snapshot, whose directory exists). */
  copyToSnapshot(source: StoredRecord, target: string, budgetMs: number): Promise<void>;
  /** Runs `task` with the pool held (and open). */
  locked<T>(task: () => Promise<T>): Promise<T>;
}

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
export async function createSnapshot(pool: SnapshotPool, spec: CreateSnapshotSpec): Promise<StoredSnapshot> {
  const begun = await pool.locked(() => beginSnapshot(pool, spec));
  if (!('intent' in begun)) return begun;
  const { intent, record, source, done } = begun;
  const { layout, indexes } = pool;
  try {
    const budgetMs = pool.copyTimeMs(pool.allocatedBytes(source.capacityBytes));
    await pool.copyToSnapshot(source, pool.snapshotDataPath(record.key), budgetMs);
    await pool.locked(() =>
      indexes.changing(async () => {
        await writeSnapshot(layout, record);
        await settleSnapshotIntent(layout, intent);
        (await indexes.snapshots()).put(record);
      }),
    );
    return record;
  } catch (error) {
    // Leave no partial copy; should that fail too (or the pool be closed), the intent stays for the next call or
    // open(), which settle it once this copy is no longer in flight.
    await pool.locked(() => settleSnapshotIntent(layout, intent)).catch(() => undefined);
    indexes.drop();
    throw error;
  } finally {
    done();
  }
}

/** The checks and the intent, with the pool held: the existing snapshot, or the copy to make. */
async function beginSnapshot(pool: SnapshotPool, spec: CreateSnapshotSpec): Promise<StoredSnapshot | SnapshotCopy> {
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
    ...shapeOf(source),
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
export async function deleteSnapshot(pool: SnapshotPool, key: string): Promise<'deleted' | 'absent'> {
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
