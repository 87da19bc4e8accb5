/**
 * Snapshots on disk, journaled like volumes: snapshots/journal/<key>.json is written before the copy is made and
 * removed when the record (snapshots/records/<key>.json) is written, so a crash part way leaves an intent that the
 * next call or open() settles: a create without a record is rolled back (its partial copy removed), one with a
 * record is kept, a delete is completed. The copy itself (snapshots/data/<key>/) is made by the backend.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import type { CreateSnapshotSpec, OpenReport, SnapshotRecord } from './backend';
import { pathExists, readJson, removeFile, removeTree, writeJsonAtomic } from '../host/files';
import { readKeyedFiles, assertSnapshotKey, assertVolumeKey, isVolumeKey, keyOfJsonFileName } from './pool-layout';
import type { PoolLayout } from './pool-layout';
import { isSize } from './records';

/** What is stored: the path is derived from the key on every read. */
export type StoredSnapshot = Omit<SnapshotRecord, 'path'>;

export interface SnapshotIntent {
  op: 'create' | 'delete';
  key: string;
  name: string;
  sourceKey: string;
  sizeBytes: number;
  /** ISO 8601. */
  at: string;
}

type Reconciled = OpenReport['reconciled'][number];

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
  const record = (typeof value === 'object' && value !== null ? value : {}) as Partial<Record<string, unknown>>;
  const { name, sourceKey, sizeBytes, createdAt, accessType, fsType } = record;
  if (
    record.key !== key ||
    typeof name !== 'string' ||
    !isVolumeKey(sourceKey) ||
    !isSize(sizeBytes) ||
    typeof createdAt !== 'string' ||
    (accessType !== undefined && accessType !== 'mount' && accessType !== 'block') ||
    (fsType !== undefined && typeof fsType !== 'string')
  ) {
    throw new DriverError(FailureType.Internal, `${file} is not a snapshot record for key ${key}`);
  }
  return { key, name, sourceKey, sizeBytes, createdAt, ...shapeOf({ accessType, fsType }) };
}

/** The loop shape, present only when set: a dir snapshot's record has neither field. */
export function shapeOf(
  shape: Pick<StoredSnapshot, 'accessType' | 'fsType'>,
): Pick<StoredSnapshot, 'accessType' | 'fsType'> {
  return {
    ...(shape.accessType === undefined ? {} : { accessType: shape.accessType }),
    ...(shape.fsType === undefined ? {} : { fsType: shape.fsType }),
  };
}

function parseIntent(value: unknown, key: string): SnapshotIntent | undefined {
  const intent = (typeof value === 'object' && value !== null ? value : {}) as Partial<Record<string, unknown>>;
  const { op, name, sourceKey, sizeBytes, at } = intent;
  if (
    (op !== 'create' && op !== 'delete') ||
    intent.key !== key ||
    typeof name !== 'string' ||
    typeof sourceKey !== 'string' ||
    !isSize(sizeBytes) ||
    typeof at !== 'string'
  ) {
    return undefined;
  }
  return { op, key, name, sourceKey, sizeBytes, at };
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
    ...shapeOf(record),
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

export async function writeSnapshotIntent(layout: PoolLayout, intent: SnapshotIntent): Promise<void> {
  const { op, key, name, sourceKey, sizeBytes, at } = intent;
  await writeJsonAtomic(layout.snapshotIntentFile(key), { op, key, name, sourceKey, sizeBytes, at });
}

/** Unreadable entries are strays, left for a person (as in the volume journal). */
export async function listSnapshotIntents(
  layout: PoolLayout,
): Promise<{ intents: SnapshotIntent[]; strays: string[] }> {
  const read = async (key: string) => {
    try {
      return parseIntent(await readJson(layout.snapshotIntentFile(key)), key);
    } catch (error) {
      if (error instanceof DriverError) return undefined;
      throw error;
    }
  };
  const { entries, strays } = await readKeyedFiles(layout.snapshotJournalDir, read);
  return { intents: entries, strays };
}

/**
 * The same rules as a volume's intent: a create whose record was written is kept; one without a record made at
 * most a partial copy, which is removed; a delete is driven forward. Snapshots hold nothing outside their
 * directory (no device is ever attached to a copy), so removing it is all a release takes.
 */
export async function settleSnapshotIntent(layout: PoolLayout, intent: SnapshotIntent): Promise<Reconciled['outcome']> {
  if (intent.op === 'create' && (await pathExists(layout.snapshotRecordFile(intent.key)))) {
    await removeFile(layout.snapshotIntentFile(intent.key));
    return 'kept';
  }
  await removeTree(layout.snapshotDir(intent.key));
  if (intent.op === 'delete') await removeFile(layout.snapshotRecordFile(intent.key));
  await removeFile(layout.snapshotIntentFile(intent.key));
  return intent.op === 'create' ? 'rolled-back' : 'completed';
}

/** Every readable intent but those of copies in flight (`inFlight`), which are theirs to settle. */
export async function settleSnapshotJournal(
  layout: PoolLayout,
  inFlight: (key: string) => boolean = () => false,
): Promise<{ reconciled: Reconciled[]; strays: string[] }> {
  const { intents, strays } = await listSnapshotIntents(layout);
  const reconciled: Reconciled[] = [];
  for (const intent of intents.filter((entry) => !inFlight(entry.key))) {
    const outcome = await settleSnapshotIntent(layout, intent);
    reconciled.push({ key: intent.key, op: `snapshot-${intent.op}`, outcome });
  }
  return { reconciled, strays };
}

/** Copies without a record and records without a copy: reported, never deleted. */
export async function findSnapshotStrays(layout: PoolLayout): Promise<string[]> {
  const strays: string[] = [];
  const recordKeys = new Set(
    (await fs.readdir(layout.snapshotRecordsDir)).flatMap((name) => keyOfJsonFileName(name) ?? []),
  );
  for (const name of await fs.readdir(layout.snapshotDataDir)) {
    if (!isVolumeKey(name) || !recordKeys.has(name)) strays.push(path.join(layout.snapshotDataDir, name));
  }
  for (const name of await fs.readdir(layout.snapshotRecordsDir)) {
    const key = keyOfJsonFileName(name);
    if (key === undefined || !(await pathExists(layout.snapshotDir(key)))) {
      strays.push(path.join(layout.snapshotRecordsDir, name));
    }
  }
  return strays;
}
