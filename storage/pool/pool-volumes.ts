/**
 * Creating, deleting and growing a volume, journaled: a create or delete writes its intent (journal.ts) before it
 * touches the pool and settles it (reconcile.ts) after, so a crash at any point leaves what the next call or
 * open() completes or rolls back; a growth writes the record only after the storage grew. PoolBackend runs each
 * call with the pool held and supplies the backend's part through VolumePool.
 */
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import type { CreateVolumeSpec, ExpandResult } from './backend';
import { removeIntent, writeIntent } from './journal';
import type { Intent } from './journal';
import type { NodeVolume } from './node-side';
import type { PoolIndexes } from './pool-indexes';
import type { PoolLayout } from './pool-layout';
import { settleIntent } from './reconcile';
import type { Release } from './reconcile';
import { assertCompatible } from './volume-compat';
import type { VolumeShape } from './volume-compat';
import { makeVolumeDir, volumeDirExists } from './volume-dirs';
import { adoptFsType, originOf } from './volume-origin';
import type { CopyOrigin, DataPaths } from './volume-origin';
import { readRecord, writeRecord } from './volume-records';
import type { StoredRecord } from './volume-records';

/** What volume work asks of the pool it runs in: PoolBackend hands over its own and its backend's hooks. */
export interface VolumePool extends DataPaths {
  readonly layout: PoolLayout;
  readonly indexes: PoolIndexes;
  readonly capacityBytes: number;
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
  /** Fills the freshly made volume directory (PoolBackend.allocate). */
  allocate(record: StoredRecord, origin?: CopyOrigin): Promise<void>;
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
 * what the backend completed the spec to, checked before the pool was held.
 */
export async function createVolume(
  pool: VolumePool,
  spec: CreateVolumeSpec,
  requestedShape: VolumeShape,
): Promise<StoredRecord> {
  const { layout, indexes } = pool;
  // Leftovers of a call that failed part way; from here on the journal is empty.
  await indexes.settle();
  const records = await indexes.records();
  const existing = records.get(spec.key) ?? records.byName(spec.name);
  if (existing) return assertCompatible(existing, spec, adoptFsType(requestedShape, spec, existing));
  const origin = spec.contentSource && (await originOf(layout, pool, spec, requestedShape));
  const shape = origin?.shape ?? requestedShape;
  if (await volumeDirExists(layout, spec.key)) {
    // A stray: its content is unknown, so it is neither adopted nor removed.
    throw new DriverError(
      FailureType.FailedPrecondition,
      `${layout.volumeDir(spec.key)} exists without a record; remove it by hand to reuse key ${spec.key}`,
    );
  }
  await pool.assertRoom(pool.allocatedBytes(spec.capacityBytes), `volume "${spec.name}"`);
  const { key, name, capacityBytes } = spec;
  const parameters = { ...spec.parameters };
  const ids = await pool.volumeIds(key, records.all());
  const intent: Intent = { op: 'create', key, name, capacityBytes, parameters, at: new Date().toISOString(), ...ids };
  const source = spec.contentSource === undefined ? {} : { contentSource: { ...spec.contentSource } };
  const createdAt = intent.at;
  const record: StoredRecord = { key, name, capacityBytes, parameters, createdAt, ...shape, ...ids, ...source };
  await indexes.changing(async () => {
    await writeIntent(layout, intent);
    try {
      await makeVolumeDir(layout, key);
      await pool.allocate(record, origin?.copy);
      await writeRecord(layout, record);
      await removeIntent(layout, key);
    } catch (error) {
      // Leave nothing half made; should that fail too, the intent stays for the next call or open().
      await settleIntent(layout, intent, pool.release).catch(() => undefined);
      throw error;
    }
  });
  records.put(record);
  return record;
}

/** Refused while the volume is in use; `existed` also when an earlier call that failed part way was just finished. */
export async function deleteVolume(pool: VolumePool, key: string): Promise<{ existed: boolean }> {
  const { layout, indexes } = pool;
  const { reconciled } = await indexes.settle();
  // An earlier call that failed part way may just have been finished for us.
  const finishedNow = reconciled.some(
    (entry) => entry.key === key && entry.op === 'delete' && entry.outcome === 'completed',
  );
  const record = await readRecord(layout, key);
  if (!record && !(await volumeDirExists(layout, key))) return { existed: finishedNow };
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
