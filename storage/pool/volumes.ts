/**
 * Creating, deleting and growing a volume, journaled: a create or delete writes its intent (journal.ts) before it
 * touches the pool and settles it after, so a crash at any point leaves what the next call or open() completes or
 * rolls back; a growth writes the record only after the storage grew. PoolBackend runs each call with the pool held
 * and passes itself, the backend's hooks included; only a restore's or clone's copy runs without the pool held (as a
 * snapshot's does: CopiesInFlight). Here too: what an existing volume must match for a create to be answered with
 * it, and the source of a restore or clone.
 */
import { promises as fs } from 'node:fs';
import { copyTimeMs } from '../../common/copy-budget';
import { DriverError, FailureType } from '../../common/failures';
import { formatBytes } from '../../common/quantity';
import type { CreateVolumeSpec, ExpandResult, MoveFence } from './backend';
import { createDir, pathExists } from '../host/files';
import { removeIntent, settleIntent, writeIntent } from './journal';
import type { Intent } from './journal';
import type { PoolBackend } from './pool-backend';
import { describeSource, mustReadVolume, readRecord, sameParameters, writeRecord } from './records';
import type { StoredRecord, VolumeShape } from './records';
import { readSnapshot } from './snapshots';
import { movesAsArchive, releaseStagedReservation, stagedReservation, transferStatus } from './transfer';
import { assertNotInUse, readStaging } from './staging';

/**
 * Idempotent by key and by name (assertCompatible says what an existing volume must match); `requestedShape` is
 * what the backend completed the spec to, checked before the pool was held. A restore or clone copies without the
 * pool held and records the volume with it held again; while it copies, a create of the same key or name, and any
 * change to its source, is Aborted.
 */
export async function createVolume(
  pool: PoolBackend,
  spec: CreateVolumeSpec,
  requestedShape: VolumeShape,
): Promise<StoredRecord> {
  const begun = await pool.locked(() => beginVolume(pool, spec, requestedShape));
  if (!('intent' in begun)) return begun;
  const { intent, record, origin, done } = begun;
  const { layout, indexes } = pool;
  await pool.copies.finish(done, {
    make: () => pool.copyIn(record, origin, copyTimeMs(pool.allocatedBytes(origin.sizeBytes), pool.copyBudget)),
    record: async () => {
      await writeRecord(layout, record);
      await removeIntent(layout, record.key);
      // A move's adopt: the volume's record reserves the room its staged copy did.
      const source = record.contentSource;
      if (source && 'moveKey' in source) await releaseStagedReservation(layout, source.moveKey);
      (await indexes.records()).put(record);
    },
    rollBack: () => settleIntent(pool, intent),
  });
  return record;
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
  pool: PoolBackend,
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
  const origin = spec.contentSource && (await originOf(pool, spec, requestedShape));
  if (spec.contentSource) {
    const source = spec.contentSource;
    const doing = `create volume "${spec.name}" from it`;
    if ('snapshotKey' in source) copies.assertSnapshotFree(source.snapshotKey, doing);
    else if ('volumeKey' in source) copies.assertVolumeFree(source.volumeKey, doing);
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
  // A move's adopt takes over the room its staged copy reserved: that room is not counted against it, and while it
  // copies it reserves only the rest (its record, written with the staged reservation's release, then holds it all).
  const move = spec.contentSource && 'moveKey' in spec.contentSource ? spec.contentSource.moveKey : undefined;
  const staged = move === undefined ? 0 : Math.min(reservedBytes, (await stagedReservation(layout, move)) ?? 0);
  await pool.assertRoom(reservedBytes, `volume "${spec.name}"`, staged);
  const { key, name, capacityBytes } = spec;
  const parameters = { ...spec.parameters };
  const ids = await pool.volumeIds(key, [...records.all(), ...copies.targetRecords()]);
  const intent: Intent = { op: 'create', key, name, capacityBytes, parameters, at: new Date().toISOString(), ...ids };
  const source = spec.contentSource === undefined ? {} : { contentSource: { ...spec.contentSource } };
  const createdAt = intent.at;
  const record: StoredRecord = { key, name, capacityBytes, parameters, createdAt, ...shape, ...ids, ...source };
  await allocateJournaled(pool, intent, record, origin?.copy);
  if (!origin) {
    records.put(record);
    return record;
  }
  const done = copies.begin({
    source: { ...spec.contentSource! },
    target: { volumeKey: key, name, record },
    reservedBytes: reservedBytes - staged,
  });
  return { intent, record, origin: origin.copy, done };
}

/**
 * Journals the create, then makes the volume's directory and has the backend fill it: an empty volume is recorded
 * at once, a restore or clone (`copy`) once its copy is made.
 */
async function allocateJournaled(pool: PoolBackend, intent: Intent, record: StoredRecord, copy?: CopyOrigin) {
  const { layout } = pool;
  await pool.indexes.changing(async () => {
    await writeIntent(layout, intent);
    try {
      await createDir(layout.volumeDir(record.key));
      await pool.allocate(record, copy);
      if (copy) return;
      await writeRecord(layout, record);
      await removeIntent(layout, record.key);
    } catch (error) {
      // Leave nothing half made; should that fail too, the intent stays for the next call or open().
      await settleIntent(pool, intent).catch(() => undefined);
      throw error;
    }
  });
}

/** Refused while the volume is in use; `existed` also when an earlier call that failed part way was just finished. */
export async function deleteVolume(pool: PoolBackend, key: string): Promise<{ existed: boolean }> {
  const { layout, indexes } = pool;
  pool.copies.assertVolumeFree(key, `delete volume ${key}`);
  const { reconciled } = await indexes.settle();
  // An earlier call that failed part way may just have been finished for us.
  const finishedNow = reconciled.some(
    (entry) => entry.key === key && entry.op === 'delete' && entry.outcome === 'completed',
  );
  const record = await readRecord(layout, key);
  if (!record && !(await pathExists(layout.volumeDir(key)))) return { existed: finishedNow };
  await assertNotInUse(pool.access, record ?? { key });
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
    await settleIntent(pool, intent);
  });
  indexes.removeVolume(key);
  return { existed: true };
}

/** Grows the storage first and the record after: a crash in between leaves a retry to redo the growth. */
export async function expandVolume(pool: PoolBackend, key: string, capacityBytes: number): Promise<ExpandResult> {
  const { layout, indexes } = pool;
  pool.copies.assertVolumeFree(key, `expand volume ${key}`);
  await indexes.settle();
  let record = await mustReadVolume(layout, key);
  // The move copies the volume at its size now: grown meanwhile, the copy would be smaller than its claim says.
  if (capacityBytes > record.capacityBytes) assertNotMoving(record, `grow volume ${key}`);
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

/* Moves (docs/volume-moves.md, "In use"). */

/**
 * The move's hold on its source volume, taken before its snapshot: refused while the volume is staged (a Pod may
 * write to it, and what it writes after the snapshot would not be copied) or held by another move. Staging is
 * recorded before anything is attached, and both run under the pool's lock: no stage slips in between.
 */
export async function fenceVolume(pool: PoolBackend, key: string, fence: MoveFence, replacing?: string): Promise<void> {
  const { layout, indexes } = pool;
  await indexes.settle();
  const record = await mustReadVolume(layout, key);
  if (record.moving?.moveKey === fence.moveKey) return;
  if (record.moving?.moveKey !== replacing) assertNotMoving(record, `move volume ${key} to ${fence.targetNodeId}`);
  const staging = await readStaging(layout, key);
  if (staging) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `volume ${key} is in use on this node (staged at ${staging.stagingPath}): stop what uses it first ` +
        '(in Kubernetes: cordon the node, then delete its Pod or scale its workload down), then move it again',
    );
  }
  const held = { ...record, moving: { moveKey: fence.moveKey, targetNodeId: fence.targetNodeId } };
  await writeRecord(layout, held);
  (await indexes.records()).put(held);
}

/** Lets the volume go (the move rolled back); false when `moveKey` does not hold it or the volume is gone. */
export async function unfenceVolume(pool: PoolBackend, key: string, moveKey: string): Promise<boolean> {
  const { layout, indexes } = pool;
  await indexes.settle();
  const record = await readRecord(layout, key);
  if (record?.moving?.moveKey !== moveKey) return false;
  const { moving: _released, ...free } = record;
  await writeRecord(layout, free);
  (await indexes.records()).put(free);
  return true;
}

/** FailedPrecondition while a move holds the volume: `doing` waits for the move to end. */
export function assertNotMoving(record: StoredRecord, doing: string): void {
  if (!record.moving) return;
  const { moveKey, targetNodeId } = record.moving;
  throw new DriverError(
    FailureType.FailedPrecondition,
    `cannot ${doing}: it is being moved to node ${targetNodeId} (move ${moveKey}); it can be used again once the ` +
      'move ends (durable-csi volumes describe shows where it stands)',
  );
}

/* Idempotency: what an existing volume must match. */

/**
 * Same key: name and size must match. Same name under another key: size and parameters must match. Either way
 * the shape (access type, filesystem) must match too.
 */
export function assertCompatible(existing: StoredRecord, spec: CreateVolumeSpec, shape: VolumeShape): StoredRecord {
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
  for (const field of ['accessType', 'fsType'] as const) {
    if (existing[field] !== shape[field]) {
      differences.push(`${field} (${existing[field] ?? 'none'}, requested ${shape[field] ?? 'none'})`);
    }
  }
  const had = existing.contentSource ? describeSource(existing.contentSource) : 'none';
  const asked = spec.contentSource ? describeSource(spec.contentSource) : 'none';
  if (had !== asked) differences.push(`content source (${had}, requested ${asked})`);
  if (differences.length === 0) return existing;
  const subject = sameKey ? `volume key ${spec.key}` : `volume "${spec.name}" (key ${existing.key})`;
  throw new DriverError(
    FailureType.AlreadyExists,
    `${subject} already exists with a different ${differences.join(' and ')}`,
  );
}

/** Human units when they are exact: a rounded "1.0Gi" would hide the byte that differs. */
export function describeSize(bytes: number): string {
  const human = formatBytes(bytes);
  return human.includes('.') ? `${bytes} bytes` : human;
}

/*
 * Restores and clones: the content source a create names (a snapshot or another volume of the pool), checked
 * against what the create asks for before anything is touched, and the filesystem the new volume keeps.
 */

/**
 * Where a restored or cloned volume's data comes from: `path` is the snapshot's copy or the source volume's data;
 * `volume` is set for a clone (a volume the node may have staged: loop freezes its filesystem while copying).
 */
export interface CopyOrigin {
  path: string;
  volume?: StoredRecord;
  /** A move's copy on a pool of trees (dir): `path` is the archive of the source's tree, to extract. */
  archive?: true;
  /** The source's size (a snapshot's, a volume's capacity): what the copy's time budget is derived from. */
  sizeBytes: number;
}

/**
 * The source of a restore or clone: NotFound when the pool does not hold it, OutOfRange when the requested
 * capacity is below its size, InvalidArgument when the request's access type or filesystem differ from its own
 * (an fsType left empty takes the source's).
 */
export async function originOf(
  pool: PoolBackend,
  spec: CreateVolumeSpec,
  requested: VolumeShape,
): Promise<{ copy: CopyOrigin; shape: VolumeShape }> {
  const source = spec.contentSource!;
  let copy: CopyOrigin;
  let sizeBytes: number;
  let own: VolumeShape;
  if ('moveKey' in source) {
    // A move's copy, verified against its manifest before the pull answered (storage/pool/transfer.ts): it holds the
    // source's filesystem, whose access type and filesystem the move's adopt names (it read them on the source).
    const staged = await transferStatus(pool.layout, source.moveKey);
    if (!staged?.done) {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `pool ${pool.layout.root} holds no verified copy of move ${source.moveKey}: pull it first`,
      );
    }
    sizeBytes = (await fs.stat(staged.image)).size;
    copy = { path: staged.image, sizeBytes, ...(movesAsArchive(pool.kind) && { archive: true as const }) };
    own = requested;
  } else if ('snapshotKey' in source) {
    const snapshot = await readSnapshot(pool.layout, source.snapshotKey);
    if (!snapshot) {
      throw new DriverError(
        FailureType.NotFound,
        `snapshot ${source.snapshotKey} does not exist in pool ${pool.layout.root}`,
      );
    }
    ({ sizeBytes } = snapshot);
    copy = { path: pool.snapshotDataPath(snapshot.key), sizeBytes };
    own = snapshot;
  } else {
    const volume = await readRecord(pool.layout, source.volumeKey);
    if (!volume) {
      throw new DriverError(
        FailureType.NotFound,
        `volume ${source.volumeKey} (the source to clone) does not exist in pool ${pool.layout.root}`,
      );
    }
    sizeBytes = volume.capacityBytes;
    copy = { path: pool.dataPath(volume.key), volume, sizeBytes };
    own = volume;
  }
  // An archive's size is its tree's data and its headers, not a capacity: the new volume's limit bounds the extract.
  if (!copy.archive && spec.capacityBytes < sizeBytes) {
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

/**
 * A restore or clone that names no fsType takes its source's filesystem (an existing volume's, on a retry) rather
 * than the backend's default; only on backends that format (the requested shape has an fsType).
 */
export function adoptFsType(requested: VolumeShape, spec: CreateVolumeSpec, source: VolumeShape): VolumeShape {
  if (!spec.contentSource || spec.fsType || requested.fsType === undefined || source.fsType === undefined) {
    return requested;
  }
  return { ...requested, fsType: source.fsType };
}
