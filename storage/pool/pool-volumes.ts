/**
 * Creating, deleting and growing a volume, journaled: a create or delete writes its intent (journal.ts) before it
 * touches the pool and settles it (reconcile.ts) after, so a crash at any point leaves what the next call or
 * open() completes or rolls back; a growth writes the record only after the storage grew. PoolBackend runs each
 * call with the pool held and supplies the backend's part through VolumePool; only a restore's or clone's copy
 * runs without it (as a snapshot's does: copies-in-flight.ts).
 */
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import type { CreateVolumeSpec, ExpandResult } from './backend';
import type { CopiesInFlight, PoolIndexes } from './pool-indexes';
import { removeIntent, writeIntent, settleIntent } from './journal';
import type { Intent, Release } from './journal';
import type { NodeVolume } from './node-side';
import type { PoolLayout } from './pool-layout';
import { assertCompatible } from './volume-compat';
import type { VolumeShape } from './volume-compat';
import { createDir, pathExists } from '../host/files';
import { adoptFsType, originOf } from './volume-origin';
import type { CopyOrigin, DataPaths } from './volume-origin';
import { readRecord, writeRecord } from './records';
import type { StoredRecord } from './records';

/** What volume work asks of the pool it runs in: PoolBackend hands over its own and its backend's hooks. */
export interface VolumePool extends DataPaths {
  readonly layout: PoolLayout;
  readonly indexes: PoolIndexes;
  readonly capacityBytes: number;
  readonly copies: CopiesInFlight;
  /** Frees everything the volume holds in the pool (PoolBackend.release). */
  readonly release: Release;
  /** What a volume of this capacity takes from the pool. */
  allocatedBytes(capacityBytes: number): number;
  /** ResourceExhausted, nothing changed, unless the pool has `bytes` to spare. */
  assertRoom(bytes: number, what: string): Promise<void>;
  /** Refuses when the pool's storage cannot hold `bytes` more (PoolBackend.checkSpace). */
  checkSpace(bytes: number, what: string): Promise<void>;
  /** What a new volume is given besides its spec (PoolBackend.volumeIds). */
  volumeIds(key: string, existing: StoredRecord[]): Promise<Pick<StoredRecord, 'projectId'>>;
  /** Fills the freshly made volume directory, but for a copy's data (PoolBackend.allocate). */
  allocate(record: StoredRecord, origin?: CopyOrigin): Promise<void>;
  /** A restore's or clone's copy into the allocated volume, without the pool held (PoolBackend.copyIn). */
  copyIn(record: StoredRecord, origin: CopyOrigin, budgetMs: number): Promise<void>;
  /** How long a copy of this many bytes may take (common/copy-budget.ts at the node's rate). */
  copyTimeMs(bytes: number): number;
  /** Runs `task` with the pool held (and open). */
  locked<T>(task: () => Promise<T>): Promise<T>;
  /** Makes the volume's storage capacityBytes large (PoolBackend.grow). */
  grow(record: StoredRecord, capacityBytes: number): Promise<void>;
  needsNodeExpansion(record: StoredRecord): boolean;
  /** FailedPrecondition while the volume is staged or mounted anywhere (NodeSide.assertNotInUse). */
  assertNotInUse(volume: NodeVolume): Promise<void>;
}

/** The volume's record; NotFound when the pool does not hold it. */
export async function mustReadVolume(layout: PoolLayout, key: string): Promise<StoredRecord> {
  const record = await readRecord(layout, key);
  if (!record) throw new DriverError(FailureType.NotFound, `volume ${key} does not exist in pool ${layout.root}`);
  return record;
}

/**
 * Idempotent by key and by name (volume-compat.ts says what an existing volume must match); `requestedShape` is
 * what the backend completed the spec to, checked before the pool was held. A restore or clone copies without the
 * pool held and records the volume with it held again; while it copies, a create of the same key or name, and any
 * change to its source, is Aborted.
 */
export async function createVolume(
  pool: VolumePool,
  spec: CreateVolumeSpec,
  requestedShape: VolumeShape,
): Promise<StoredRecord> {
  const begun = await pool.locked(() => beginVolume(pool, spec, requestedShape));
  if (!('intent' in begun)) return begun;
  const { intent, record, origin, done } = begun;
  const { layout, indexes } = pool;
  try {
    await pool.copyIn(record, origin, pool.copyTimeMs(pool.allocatedBytes(origin.sizeBytes)));
    await pool.locked(() =>
      indexes.changing(async () => {
        await writeRecord(layout, record);
        await removeIntent(layout, record.key);
        (await indexes.records()).put(record);
      }),
    );
    return record;
  } catch (error) {
    await pool.locked(() => settleIntent(layout, intent, pool.release)).catch(() => undefined);
    indexes.drop();
    throw error;
  } finally {
    done();
  }
}

/** A restore or clone journaled and allocated, its copy still to make. */
interface VolumeCopy {
  intent: Intent;
  record: StoredRecord;
  origin: CopyOrigin;
  done: () => void;
}

/** With the pool held: the existing volume, a new empty one, or a restore or clone ready to copy. */
async function beginVolume(
  pool: VolumePool,
  spec: CreateVolumeSpec,
  requestedShape: VolumeShape,
): Promise<StoredRecord | VolumeCopy> {
  const { layout, indexes, copies } = pool;
  // Leftovers of a call that failed part way; from here on the journal is empty (but for copies in flight).
  await indexes.settle();
  const records = await indexes.records();
  const existing = records.get(spec.key) ?? records.byName(spec.name);
  if (existing) return assertCompatible(existing, spec, adoptFsType(requestedShape, spec, existing));
  // Not recorded yet, but maybe being copied into by an earlier attempt.
  copies.assertVolumeFree(spec.key, `create volume "${spec.name}"`, spec.name);
  const origin = spec.contentSource && (await originOf(layout, pool, spec, requestedShape));
  if (spec.contentSource) {
    const source = spec.contentSource;
    const doing = `create volume "${spec.name}" from it`;
    if ('snapshotKey' in source) copies.assertSnapshotFree(source.snapshotKey, doing);
    else copies.assertVolumeFree(source.volumeKey, doing);
  }
  const shape = origin?.shape ?? requestedShape;
  if (await pathExists(layout.volumeDir(spec.key))) {
    // A stray: its content is unknown, so it is neither adopted nor removed.
    throw new DriverError(
      FailureType.FailedPrecondition,
      `${layout.volumeDir(spec.key)} exists without a record; remove it by hand to reuse key ${spec.key}`,
    );
  }
  const reservedBytes = pool.allocatedBytes(spec.capacityBytes);
  await pool.assertRoom(reservedBytes, `volume "${spec.name}"`);
  const { key, name, capacityBytes } = spec;
  const parameters = { ...spec.parameters };
  const ids = await pool.volumeIds(key, [...records.all(), ...copies.targetRecords()]);
  const intent: Intent = { op: 'create', key, name, capacityBytes, parameters, at: new Date().toISOString(), ...ids };
  const source = spec.contentSource === undefined ? {} : { contentSource: { ...spec.contentSource } };
  const createdAt = intent.at;
  const record: StoredRecord = { key, name, capacityBytes, parameters, createdAt, ...shape, ...ids, ...source };
  await indexes.changing(async () => {
    await writeIntent(layout, intent);
    try {
      await createDir(layout.volumeDir(key));
      await pool.allocate(record, origin?.copy);
      if (origin) return;
      await writeRecord(layout, record);
      await removeIntent(layout, key);
    } catch (error) {
      // Leave nothing half made; should that fail too, the intent stays for the next call or open().
      await settleIntent(layout, intent, pool.release).catch(() => undefined);
      throw error;
    }
  });
  if (!origin) {
    records.put(record);
    return record;
  }
  const from = spec.contentSource!;
  const done = copies.begin({
    source: 'snapshotKey' in from ? { snapshotKey: from.snapshotKey } : { volumeKey: from.volumeKey },
    target: { volumeKey: key, name, record },
    reservedBytes,
  });
  return { intent, record, origin: origin.copy, done };
}

/** Refused while the volume is in use; `existed` also when an earlier call that failed part way was just finished. */
export async function deleteVolume(pool: VolumePool, key: string): Promise<{ existed: boolean }> {
  const { layout, indexes } = pool;
  pool.copies.assertVolumeFree(key, `delete volume ${key}`);
  const { reconciled } = await indexes.settle();
  // An earlier call that failed part way may just have been finished for us.
  const finishedNow = reconciled.some(
    (entry) => entry.key === key && entry.op === 'delete' && entry.outcome === 'completed',
  );
  const record = await readRecord(layout, key);
  if (!record && !(await pathExists(layout.volumeDir(key)))) return { existed: finishedNow };
  await pool.assertNotInUse(record ?? { key });
  const intent: Intent = {
    op: 'delete',
    key,
    name: record?.name ?? '',
    capacityBytes: record?.capacityBytes ?? 0,
    parameters: record?.parameters ?? {},
    at: new Date().toISOString(),
    ...(record?.projectId === undefined ? {} : { projectId: record.projectId }),
  };
  await indexes.changing(async () => {
    await writeIntent(layout, intent);
    await settleIntent(layout, intent, pool.release);
  });
  indexes.removeVolume(key);
  return { existed: true };
}

/** Grows the storage first and the record after: a crash in between leaves a retry to redo the growth. */
export async function expandVolume(pool: VolumePool, key: string, capacityBytes: number): Promise<ExpandResult> {
  const { layout, indexes } = pool;
  pool.copies.assertVolumeFree(key, `expand volume ${key}`);
  await indexes.settle();
  let record = await mustReadVolume(layout, key);
  if (capacityBytes > record.capacityBytes) {
    const records = await indexes.records();
    const extraBytes = pool.allocatedBytes(capacityBytes) - pool.allocatedBytes(record.capacityBytes);
    const availableBytes = Math.max(0, pool.capacityBytes - (await indexes.reservedBytes()));
    if (extraBytes > availableBytes) {
      throw new DriverError(
        FailureType.ResourceExhausted,
        `cannot grow volume "${record.name}" to ${formatBytes(capacityBytes)}: it needs ${formatBytes(extraBytes)} ` +
          `more and ${formatBytes(availableBytes)} of the pool's ${formatBytes(pool.capacityBytes)} is available`,
      );
    }
    await pool.checkSpace(extraBytes, `volume "${record.name}"`);
    const grown = { ...record, capacityBytes };
    await indexes.changing(async () => {
      await pool.grow(record, capacityBytes);
      await writeRecord(layout, grown);
    });
    records.put(grown);
    record = grown;
  }
  return { capacityBytes: record.capacityBytes, nodeExpansionRequired: pool.needsNodeExpansion(record) };
}
