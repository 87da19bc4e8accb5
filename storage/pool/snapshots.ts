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
import type { CreateGroupSnapshotSpec, CreateSnapshotSpec, MovedSnapshotOrigin, SnapshotRecord } from './backend';
import { createDir, jsonFields, pathExists, readJson, removeFile, writeJsonAtomic } from '../host/files';
import { settleSnapshotIntent, writeSnapshotIntent, type SnapshotIntent } from './journal';
import type { PoolBackend } from './pool-backend';
import { assertMoveKey, assertSnapshotKey, assertVolumeKey, isVolumeKey, keyOfJsonFileName } from './pool-layout';
import type { PoolLayout } from './pool-layout';
import { isShape, isSize, readRecord, storedShape } from './records';
import type { StoredRecord } from './records';
import { releaseStagedReservation, stagedReservation, transferStatus } from './transfer';

/** What is stored: the path is derived from the key on every read. */
export type StoredSnapshot = Omit<SnapshotRecord, 'path'>;

/** Throws InvalidArgument; runs before anything touches the filesystem. */
export function assertCreateSnapshotSpec(spec: unknown): asserts spec is CreateSnapshotSpec {
  if (typeof spec !== 'object' || spec === null) {
    throw new DriverError(FailureType.InvalidArgument, 'a snapshot spec is required');
  }
  const { snapshotKey, sourceKey, name, moved } = spec as Partial<Record<keyof CreateSnapshotSpec, unknown>>;
  assertSnapshotKey(snapshotKey);
  assertVolumeKey(sourceKey);
  if (typeof name !== 'string' || name === '') {
    throw new DriverError(FailureType.InvalidArgument, 'snapshot name must be a non-empty string');
  }
  if (moved === undefined) return;
  const origin = jsonFields(moved);
  assertMoveKey(origin.moveKey);
  if (
    !isSourceVolumeId(origin.sourceVolumeId) ||
    !isSize(origin.sizeBytes) ||
    typeof origin.createdAt !== 'string' ||
    !isShape({ accessType: origin.accessType, fsType: origin.fsType })
  ) {
    throw new DriverError(
      FailureType.InvalidArgument,
      'a moved snapshot needs its source volume ID, size, creation time and shape',
    );
  }
}

/** A volume ID as a moved snapshot keeps it: opaque here (the pool knows no node), printable and bounded. */
function isSourceVolumeId(value: unknown): value is string {
  return typeof value === 'string' && /^[\x21-\x7e]{1,256}$/.test(value);
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
    !isShape(shape) ||
    (record.groupKey !== undefined && !isVolumeKey(record.groupKey)) ||
    (record.sourceVolumeId !== undefined && !isSourceVolumeId(record.sourceVolumeId))
  ) {
    throw new DriverError(FailureType.Internal, `${file} is not a snapshot record for key ${key}`);
  }
  const group = record.groupKey === undefined ? {} : { groupKey: record.groupKey as string };
  const moved = record.sourceVolumeId === undefined ? {} : { sourceVolumeId: record.sourceVolumeId as string };
  return { key, name, sourceKey, sizeBytes, createdAt, ...storedShape(shape), ...group, ...moved };
}

export async function readSnapshot(layout: PoolLayout, key: string): Promise<StoredSnapshot | undefined> {
  const file = layout.snapshotRecordFile(key);
  const value = await readJson(file);
  return value === undefined ? undefined : parseSnapshot(value, key, file);
}

export async function writeSnapshot(layout: PoolLayout, record: StoredSnapshot): Promise<void> {
  const { key, name, sourceKey, sizeBytes, createdAt, groupKey, sourceVolumeId } = record;
  await writeJsonAtomic(layout.snapshotRecordFile(key), {
    key,
    name,
    sourceKey,
    sizeBytes,
    createdAt,
    ...storedShape(record),
    ...(groupKey === undefined ? {} : { groupKey }),
    ...(sourceVolumeId === undefined ? {} : { sourceVolumeId }),
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
interface SnapshotCopy<Source = StoredRecord> {
  intent: SnapshotIntent;
  record: StoredSnapshot;
  /** A volume of the pool; for a single snapshot also a move's verified copy in transfers/in/ (StagedCopy). */
  source: Source;
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
      const budgetMs = copyTimeMs(pool.allocatedBytes(record.sizeBytes), pool.copyBudget);
      const target = pool.snapshotDataPath(record.key);
      await ('staged' in source
        ? pool.copyStagedToSnapshot(source.staged, target, budgetMs)
        : pool.copyToSnapshot(source, target, budgetMs));
    },
    record: async () => {
      await writeSnapshot(layout, record);
      await settleSnapshotIntent(layout, intent);
      // A move's adopt: the snapshot's record reserves the room its staged copy did.
      if ('staged' in source) await releaseStagedReservation(layout, source.moveKey);
      (await indexes.snapshots()).put(record);
    },
    // Leaves no partial copy.
    rollBack: () => settleSnapshotIntent(layout, intent),
  });
  return record;
}

/** The checks and the intent, with the pool held: the existing snapshot, or the copy to make. */
/** A move's verified copy in transfers/in/<move key>/: its file (an image, or a dir pool's archive). */
interface StagedCopy {
  staged: string;
  moveKey: string;
}

async function beginSnapshot(
  pool: PoolBackend,
  spec: CreateSnapshotSpec,
): Promise<StoredSnapshot | SnapshotCopy<StoredRecord | StagedCopy>> {
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
  const origin = spec.moved ? await stagedOrigin(pool, spec.moved) : await volumeOrigin(pool, sourceKey, name);
  if (await pathExists(layout.snapshotDir(key))) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `${layout.snapshotDir(key)} exists without a record; remove it by hand to reuse snapshot key ${key}`,
    );
  }
  const { sizeBytes } = origin;
  const reservedBytes = pool.allocatedBytes(sizeBytes);
  await pool.assertRoom(reservedBytes, `snapshot "${name}" of volume "${origin.sourceName}"`, origin.staged);
  const at = new Date().toISOString();
  const intent: SnapshotIntent = { op: 'create', key, name, sourceKey, sizeBytes, at };
  const record: StoredSnapshot = {
    key,
    name,
    sourceKey,
    sizeBytes,
    // A moved snapshot is still of the instant its source was copied.
    createdAt: spec.moved?.createdAt ?? at,
    ...storedShape(spec.moved ?? origin.shape),
    ...(spec.moved && { sourceVolumeId: spec.moved.sourceVolumeId }),
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
    source: spec.moved ? { moveKey: spec.moved.moveKey } : { volumeKey: sourceKey },
    target: { snapshotKey: key, name },
    // A move's adopt copies into the room its staged copy reserved, and reserves only the rest meanwhile.
    reservedBytes: reservedBytes - origin.staged,
  });
  return { intent, record, source: origin.source, done };
}

interface SnapshotOrigin {
  source: StoredRecord | StagedCopy;
  sizeBytes: number;
  shape: StoredRecord | MovedSnapshotOrigin;
  sourceName: string;
  /** Bytes a staged copy already reserves for it (a move's adopt takes that room over). */
  staged: number;
}

async function volumeOrigin(pool: PoolBackend, sourceKey: string, name: string): Promise<SnapshotOrigin> {
  const source = await readRecord(pool.layout, sourceKey);
  if (!source) {
    throw new DriverError(FailureType.NotFound, `volume ${sourceKey} does not exist in pool ${pool.layout.root}`);
  }
  pool.copies.assertVolumeFree(sourceKey, `snapshot volume ${sourceKey} as "${name}"`);
  return { source, sizeBytes: source.capacityBytes, shape: source, sourceName: source.name, staged: 0 };
}

/** A move's copy, verified against its manifest before the pull answered (storage/pool/transfer.ts). */
async function stagedOrigin(pool: PoolBackend, moved: MovedSnapshotOrigin): Promise<SnapshotOrigin> {
  const { moveKey } = moved;
  const staged = await transferStatus(pool.layout, moveKey);
  if (!staged?.done) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `pool ${pool.layout.root} holds no verified copy of move ${moveKey}: pull it first`,
    );
  }
  const reserved = Math.min(pool.allocatedBytes(moved.sizeBytes), (await stagedReservation(pool.layout, moveKey)) ?? 0);
  return {
    source: { staged: staged.image, moveKey },
    sizeBytes: moved.sizeBytes,
    shape: moved,
    sourceName: moved.sourceVolumeId,
    staged: reserved,
  };
}

/**
 * 'deleted' also when an earlier call that failed part way was just finished by settling the journal. A member of a
 * group snapshot is deleted with its group only (FailedPrecondition), unless `asMember`: its group's deletion, or a
 * written-off copy the node's record deletes.
 */
export async function deleteSnapshot(
  pool: PoolBackend,
  key: string,
  options: { asMember?: boolean } = {},
): Promise<'deleted' | 'absent'> {
  const { layout, indexes } = pool;
  pool.copies.assertSnapshotFree(key, `delete snapshot ${key}`);
  const { reconciled } = await indexes.settle();
  const finishedNow = reconciled.some(
    (entry) => entry.key === key && entry.op === 'snapshot-delete' && entry.outcome === 'completed',
  );
  const record = await readSnapshot(layout, key);
  if (!record && !(await pathExists(layout.snapshotDir(key)))) return finishedNow ? 'deleted' : 'absent';
  if (record?.groupKey !== undefined && !options.asMember) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `snapshot ${key} ("${record.name}") is a member of group snapshot ${record.groupKey} and is deleted with it ` +
        'only: delete the VolumeGroupSnapshot (DeleteVolumeGroupSnapshot)',
    );
  }
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

/* Group snapshots: one copy per member volume, all at one instant (docs/snapshots.md, "Group snapshots"). */

/**
 * Each member is a snapshot of its own (its own intent, record and copy, so listing, restoring and the journal
 * treat it as any snapshot), recorded with the group's key. The members are journaled, then copied together by the
 * backend (copyGroupToSnapshots: every filesystem frozen, each image copied, all thawed), then recorded together:
 * every record is written before any intent is removed, and a failure removes the records already written, so a
 * group is recorded whole or not at all. Only a crash between two record writes can leave part of a group recorded
 * (open() keeps a create whose record exists); the retry of the same group finds it partial, deletes those members
 * and copies the whole group again, so its members are still of one instant.
 */
export async function createGroupSnapshot(pool: PoolBackend, spec: CreateGroupSnapshotSpec): Promise<StoredSnapshot[]> {
  const begun = await pool.locked(() => beginGroup(pool, spec));
  if (!('copies' in begun)) return begun.made;
  const { copies, done } = begun;
  const { layout, indexes } = pool;
  const budgetMs = copies.reduce(
    (sum, copy) => sum + copyTimeMs(pool.allocatedBytes(copy.source.capacityBytes), pool.copyBudget),
    0,
  );
  await pool.copies.finish(done, {
    make: () =>
      pool.copyGroupToSnapshots(
        copies.map((copy) => ({ source: copy.source, target: pool.snapshotDataPath(copy.record.key) })),
        budgetMs,
      ),
    record: async () => {
      for (const copy of copies) await writeSnapshot(layout, copy.record);
      for (const copy of copies) await settleSnapshotIntent(layout, copy.intent);
      const index = await indexes.snapshots();
      for (const copy of copies) index.put(copy.record);
    },
    rollBack: async () => {
      for (const copy of copies) await removeFile(layout.snapshotRecordFile(copy.record.key));
      for (const copy of copies) await settleSnapshotIntent(layout, copy.intent);
    },
  });
  return copies.map((copy) => copy.record);
}

function memberName(groupName: string, sourceKey: string): string {
  return `${groupName}/${sourceKey}`;
}

/** The checks and the members' intents, with the pool held: the members made earlier, or the copies to make. */
async function beginGroup(
  pool: PoolBackend,
  spec: CreateGroupSnapshotSpec,
): Promise<{ made: StoredSnapshot[] } | { copies: SnapshotCopy[]; done: () => void }> {
  const { layout, indexes, copies } = pool;
  const { groupKey, name, members } = spec;
  await indexes.settle();
  const snapshots = await indexes.snapshots();
  const ofGroup = snapshots.all().filter((record) => record.groupKey === groupKey);
  const sameMembers =
    ofGroup.length === members.length &&
    members.every((member) =>
      ofGroup.some(
        (record) =>
          record.key === member.snapshotKey &&
          record.sourceKey === member.sourceKey &&
          record.name === memberName(name, member.sourceKey),
      ),
    );
  if (sameMembers) return { made: members.map((member) => ofGroup.find((r) => r.key === member.snapshotKey)!) };
  for (const member of members) {
    const taken = snapshots.get(member.snapshotKey) ?? snapshots.byName(memberName(name, member.sourceKey));
    if (taken && taken.groupKey !== groupKey) {
      throw new DriverError(
        FailureType.AlreadyExists,
        `snapshot "${taken.name}" (key ${taken.key}) already exists, of volume ${taken.sourceKey}; group snapshot ` +
          `"${name}" (key ${groupKey}) asked for key ${member.snapshotKey} of volume ${member.sourceKey}`,
      );
    }
    copies.assertSnapshotFree(member.snapshotKey, `create group snapshot "${name}"`);
  }
  const sources: StoredRecord[] = [];
  for (const member of members) {
    const source = await readRecord(layout, member.sourceKey);
    if (!source) {
      throw new DriverError(FailureType.NotFound, `volume ${member.sourceKey} does not exist in pool ${layout.root}`);
    }
    copies.assertVolumeFree(member.sourceKey, `snapshot volume ${member.sourceKey} in group "${name}"`);
    sources.push(source);
  }
  // A part of this group a crash left recorded (see createGroupSnapshot): removed, and the whole group copied again.
  for (const partial of ofGroup) await deleteSnapshot(pool, partial.key, { asMember: true });
  for (const member of members) {
    if (await pathExists(layout.snapshotDir(member.snapshotKey))) {
      throw new DriverError(
        FailureType.FailedPrecondition,
        `${layout.snapshotDir(member.snapshotKey)} exists without a record; remove it by hand to reuse snapshot key ` +
          member.snapshotKey,
      );
    }
  }
  const reservedBytes = sources.reduce((sum, source) => sum + pool.allocatedBytes(source.capacityBytes), 0);
  await pool.assertRoom(reservedBytes, `group snapshot "${name}" of ${members.length} volumes`);
  const at = new Date().toISOString();
  const made: SnapshotCopy[] = [];
  const dones: (() => void)[] = [];
  try {
    for (const [index, member] of members.entries()) {
      const source = sources[index]!;
      const { snapshotKey: key, sourceKey } = member;
      const intent: SnapshotIntent = {
        op: 'create',
        key,
        name: memberName(name, sourceKey),
        sourceKey,
        sizeBytes: source.capacityBytes,
        at,
      };
      const record: StoredSnapshot = {
        key,
        name: intent.name,
        sourceKey,
        sizeBytes: source.capacityBytes,
        createdAt: at,
        ...storedShape(source),
        groupKey,
      };
      await indexes.changing(async () => {
        await writeSnapshotIntent(layout, intent);
        await createDir(layout.snapshotDir(key));
      });
      made.push({ intent, record, source, done: () => undefined });
      dones.push(
        copies.begin({
          source: { volumeKey: sourceKey },
          target: { snapshotKey: key, name: intent.name },
          reservedBytes: pool.allocatedBytes(source.capacityBytes),
        }),
      );
    }
  } catch (error) {
    for (const copy of made) await settleSnapshotIntent(layout, copy.intent).catch(() => undefined);
    for (const done of dones) done();
    throw error;
  }
  return { copies: made, done: () => dones.forEach((done) => done()) };
}

/**
 * Deletes every member of the group, each as a snapshot is deleted (journaled). The CO names the members it knows
 * (DeleteVolumeGroupSnapshotRequest.snapshot_ids): a group the pool holds with other members is InvalidArgument, and
 * nothing is deleted; none held (deleted earlier, or never made) is 'absent'.
 */
export async function deleteGroupSnapshot(
  pool: PoolBackend,
  groupKey: string,
  memberKeys: string[],
): Promise<'deleted' | 'absent'> {
  const { indexes } = pool;
  for (const key of memberKeys) pool.copies.assertSnapshotFree(key, `delete group snapshot ${groupKey}`);
  await indexes.settle();
  const snapshots = await indexes.snapshots();
  const held = snapshots.all().filter((record) => record.groupKey === groupKey);
  const strangers = memberKeys.flatMap((key) => {
    const record = snapshots.get(key);
    return record && record.groupKey !== groupKey ? [key] : [];
  });
  const unnamed = held.filter((record) => !memberKeys.includes(record.key)).map((record) => record.key);
  if (strangers.length > 0 || unnamed.length > 0) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `snapshot_ids do not match group snapshot ${groupKey}: ` +
        [
          strangers.length > 0 ? `${strangers.join(', ')} are not its members` : '',
          unnamed.length > 0 ? `its members ${unnamed.join(', ')} are not named` : '',
        ]
          .filter(Boolean)
          .join('; '),
    );
  }
  let deleted = false;
  for (const key of memberKeys) {
    if ((await deleteSnapshot(pool, key, { asMember: true })) === 'deleted') deleted = true;
  }
  return deleted ? 'deleted' : 'absent';
}
