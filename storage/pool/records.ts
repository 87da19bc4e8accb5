/**
 * Volume records: one JSON file per volume under records/, whose existence is what makes a volume exist, and the
 * checks of what callers ask for and of what is read back from disk.
 */
import { promises as fs } from 'node:fs';
import { DriverError, FailureType } from '../../common/failures';
import type { ContentSource, CreateVolumeSpec, MoveFence, VolumeRecord } from './backend';
import { jsonFields, pathExists, readJson, removeFile, writeJsonAtomic } from '../host/files';
import { assertMoveKey, assertSnapshotKey, assertVolumeKey, isVolumeKey, keyOfJsonFileName } from './pool-layout';
import type { PoolLayout } from './pool-layout';

/** What is stored: the path is derived from the key on every read, so a moved pool keeps working. */
export type StoredRecord = Omit<VolumeRecord, 'path'>;

/** What a create records beyond the common fields (dir: nothing; loop: access type and filesystem). */
export type VolumeShape = Pick<StoredRecord, 'accessType' | 'fsType'>;

/** A volume's or snapshot's shape as it is stored: its fields present only when set, so a dir record has neither. */
export function storedShape(shape: VolumeShape): VolumeShape {
  return {
    ...(shape.accessType === undefined ? {} : { accessType: shape.accessType }),
    ...(shape.fsType === undefined ? {} : { fsType: shape.fsType }),
  };
}

/** Whether the fields read back from a record make a shape. */
export function isShape(shape: { accessType?: unknown; fsType?: unknown }): shape is VolumeShape {
  const { accessType, fsType } = shape;
  const access = accessType === undefined || accessType === 'mount' || accessType === 'block';
  return access && (fsType === undefined || typeof fsType === 'string');
}

function parseRecord(value: unknown, key: string, file: string): StoredRecord {
  const record = jsonFields(value);
  const { name, capacityBytes, parameters, createdAt, projectId, contentSource, moving } = record;
  const shape = { accessType: record.accessType, fsType: record.fsType };
  if (
    record.key !== key ||
    typeof name !== 'string' ||
    !isSize(capacityBytes) ||
    !isStringMap(parameters) ||
    typeof createdAt !== 'string' ||
    !isShape(shape) ||
    (projectId !== undefined && !isProjectId(projectId)) ||
    (contentSource !== undefined && !isContentSource(contentSource)) ||
    (moving !== undefined && !isMoveFence(moving))
  ) {
    throw new DriverError(FailureType.Internal, `${file} is not a volume record for key ${key}`);
  }
  const optional = shapeFields({ ...shape, projectId, contentSource, moving });
  return { key, name, capacityBytes, parameters, createdAt, ...optional };
}

/** The optional fields, present only when set: a dir record stays exactly what it always was. */
type OptionalFields = Pick<StoredRecord, 'accessType' | 'fsType' | 'projectId' | 'contentSource' | 'moving'>;

function shapeFields(shape: OptionalFields): OptionalFields {
  return {
    ...storedShape(shape),
    ...(shape.projectId === undefined ? {} : { projectId: shape.projectId }),
    ...(shape.contentSource === undefined ? {} : { contentSource: { ...shape.contentSource } }),
    ...(shape.moving === undefined ? {} : { moving: { ...shape.moving } }),
  };
}

export async function readRecord(layout: PoolLayout, key: string): Promise<StoredRecord | undefined> {
  const file = layout.recordFile(key);
  const value = await readJson(file);
  return value === undefined ? undefined : parseRecord(value, key, file);
}

/** The volume's record; NotFound when the pool does not hold it. */
export async function mustReadVolume(layout: PoolLayout, key: string): Promise<StoredRecord> {
  const record = await readRecord(layout, key);
  if (!record) throw new DriverError(FailureType.NotFound, `volume ${key} does not exist in pool ${layout.root}`);
  return record;
}

export async function recordExists(layout: PoolLayout, key: string): Promise<boolean> {
  return pathExists(layout.recordFile(key));
}

export async function writeRecord(layout: PoolLayout, record: StoredRecord): Promise<void> {
  const { key, name, capacityBytes, parameters, createdAt } = record;
  await writeJsonAtomic(layout.recordFile(key), {
    key,
    name,
    capacityBytes,
    parameters,
    createdAt,
    ...shapeFields(record),
  });
}

export async function removeRecord(layout: PoolLayout, key: string): Promise<void> {
  await removeFile(layout.recordFile(key));
}

/** Keys of every record file, sorted; other names in records/ are ignored (open() reports them). */
export async function listRecordKeys(layout: PoolLayout): Promise<string[]> {
  const names = await fs.readdir(layout.recordsDir);
  return names.flatMap((name) => keyOfJsonFileName(name) ?? []).sort();
}

/** Sorted by key. */
export async function listRecords(layout: PoolLayout): Promise<StoredRecord[]> {
  const records: StoredRecord[] = [];
  for (const key of await listRecordKeys(layout)) {
    const record = await readRecord(layout, key);
    if (record) records.push(record);
  }
  return records;
}

/* What callers ask for, and what is read back from disk. */

export function isSize(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

export function isStringMap(value: unknown): value is Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  return Object.values(value).every((entry) => typeof entry === 'string');
}

export function sameParameters(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && a[key] === b[key]);
}

/** Exactly one of the three keys, well formed. */
function isMoveFence(value: unknown): value is MoveFence {
  const fence = jsonFields(value);
  return Object.keys(fence).length === 2 && isVolumeKey(fence.moveKey) && typeof fence.targetNodeId === 'string';
}

export function isContentSource(value: unknown): value is ContentSource {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  const source = value as Partial<Record<string, unknown>>;
  return (
    keys.length === 1 &&
    (isVolumeKey(source.snapshotKey) || isVolumeKey(source.volumeKey) || isVolumeKey(source.moveKey))
  );
}

function assertContentSource(value: unknown): asserts value is ContentSource {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || Object.keys(value).length !== 1) {
    throw new DriverError(
      FailureType.InvalidArgument,
      'a content source names exactly one snapshotKey, volumeKey or moveKey',
    );
  }
  const source = value as Partial<Record<string, unknown>>;
  if ('snapshotKey' in source) assertSnapshotKey(source.snapshotKey);
  else if ('volumeKey' in source) assertVolumeKey(source.volumeKey);
  else if ('moveKey' in source) assertMoveKey(source.moveKey);
  else
    throw new DriverError(
      FailureType.InvalidArgument,
      'a content source names a snapshotKey, a volumeKey or a moveKey',
    );
}

/** Throws InvalidArgument; runs before anything touches the filesystem. */
export function assertCreateVolumeSpec(spec: unknown): asserts spec is CreateVolumeSpec {
  if (typeof spec !== 'object' || spec === null) {
    throw new DriverError(FailureType.InvalidArgument, 'a volume spec is required');
  }
  const { key, name, capacityBytes, parameters, contentSource } = spec as Partial<
    Record<keyof CreateVolumeSpec, unknown>
  >;
  assertVolumeKey(key);
  if (typeof name !== 'string' || name === '') {
    throw new DriverError(FailureType.InvalidArgument, 'volume name must be a non-empty string');
  }
  if (!isSize(capacityBytes)) {
    throw new DriverError(
      FailureType.InvalidArgument,
      `capacity ${String(capacityBytes)} is not a whole number of bytes >= 0`,
    );
  }
  if (!isStringMap(parameters)) {
    throw new DriverError(FailureType.InvalidArgument, 'volume parameters must map strings to strings');
  }
  if (contentSource === undefined) return;
  assertContentSource(contentSource);
  if ('volumeKey' in contentSource && contentSource.volumeKey === key) {
    throw new DriverError(FailureType.InvalidArgument, `volume ${key} cannot be cloned from itself`);
  }
}

/** For messages: "snapshot <key>", "volume <key>" or "the copy of move <key>". */
export function describeSource(source: ContentSource): string {
  if ('moveKey' in source) return `the copy of move ${source.moveKey}`;
  return 'snapshotKey' in source ? `snapshot ${source.snapshotKey}` : `volume ${source.volumeKey}`;
}

/**
 * The `projectId` field of a record and an intent, as the pool checks it when it reads them back. Which ID a dir
 * volume gets, and what the filesystem does with it, is the dir backend's (storage/dir/dir-backend.ts).
 */

/** The highest project ID: below 2^31, for tools that read it signed. */
export const LAST_PROJECT_ID = 2 ** 31 - 1;

export function isProjectId(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 1 && (value as number) <= LAST_PROJECT_ID;
}
