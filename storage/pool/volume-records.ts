/** One JSON file per volume under records/; the record's existence is what makes a volume exist. */
import { promises as fs } from 'node:fs';
import { DriverError, FailureType } from '../../common/failures';
import type { VolumeRecord } from './backend';
import { readJson, removeFile, writeJsonAtomic, pathExists } from '../host/files';
import { keyOfJsonFileName } from './pool-layout';
import type { PoolLayout } from './pool-layout';
import { isProjectId } from './project-id';
import { isContentSource, isSize, isStringMap } from './volume-spec';

/** What is stored: the path is derived from the key on every read, so a moved pool keeps working. */
export type StoredRecord = Omit<VolumeRecord, 'path'>;

function parseRecord(value: unknown, key: string, file: string): StoredRecord {
  const record = (typeof value === 'object' && value !== null ? value : {}) as Partial<Record<string, unknown>>;
  const { name, capacityBytes, parameters, createdAt, accessType, fsType, projectId, contentSource } = record;
  if (
    record.key !== key ||
    typeof name !== 'string' ||
    !isSize(capacityBytes) ||
    !isStringMap(parameters) ||
    typeof createdAt !== 'string' ||
    (accessType !== undefined && accessType !== 'mount' && accessType !== 'block') ||
    (fsType !== undefined && typeof fsType !== 'string') ||
    (projectId !== undefined && !isProjectId(projectId)) ||
    (contentSource !== undefined && !isContentSource(contentSource))
  ) {
    throw new DriverError(FailureType.Internal, `${file} is not a volume record for key ${key}`);
  }
  const shape = shapeFields({ accessType, fsType, projectId, contentSource });
  return { key, name, capacityBytes, parameters, createdAt, ...shape };
}

/** The optional fields, present only when set: a dir record stays exactly what it always was. */
type OptionalFields = Pick<StoredRecord, 'accessType' | 'fsType' | 'projectId' | 'contentSource'>;

function shapeFields(shape: OptionalFields): OptionalFields {
  return {
    ...(shape.accessType === undefined ? {} : { accessType: shape.accessType }),
    ...(shape.fsType === undefined ? {} : { fsType: shape.fsType }),
    ...(shape.projectId === undefined ? {} : { projectId: shape.projectId }),
    ...(shape.contentSource === undefined ? {} : { contentSource: { ...shape.contentSource } }),
  };
}

export async function readRecord(layout: PoolLayout, key: string): Promise<StoredRecord | undefined> {
  const file = layout.recordFile(key);
  const value = await readJson(file);
  return value === undefined ? undefined : parseRecord(value, key, file);
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

export function withPath(layout: PoolLayout, record: StoredRecord): VolumeRecord {
  return { ...record, path: layout.volumeDir(record.key) };
}
