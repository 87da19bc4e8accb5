/**
 * staging/<key>.json: where a volume is staged on this node and how. Written before anything is attached or
 * mounted and removed after everything is undone, so that whatever a crash or a reboot interrupts, the pool
 * knows the volume may be in use: deleteVolume refuses it, and open() re-establishes its device and mount.
 */
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import type { AccessType } from '../pool/backend';
import { readJson, removeFile, writeJsonAtomic } from '../host/files';
import { readKeyedFiles } from '../pool/pool-layout';
import type { PoolLayout } from '../pool/pool-layout';

export interface StagingRecord {
  key: string;
  /** Absolute, as the CO gave it. */
  stagingPath: string;
  accessType: AccessType;
  /** Loop mount volumes: the filesystem mounted there. */
  fsType?: string;
  mountFlags: string[];
  /** True when stage made the directory: unstage then removes it (if empty); otherwise it is the CO's. */
  createdDir: boolean;
  /** ISO 8601. */
  stagedAt: string;
}

function parseStaging(value: unknown, key: string): StagingRecord | undefined {
  const record = (typeof value === 'object' && value !== null ? value : {}) as Partial<Record<string, unknown>>;
  const { stagingPath, accessType, fsType, mountFlags, createdDir, stagedAt } = record;
  if (
    record.key !== key ||
    typeof stagingPath !== 'string' ||
    !path.isAbsolute(stagingPath) ||
    (accessType !== 'mount' && accessType !== 'block') ||
    (fsType !== undefined && typeof fsType !== 'string') ||
    !Array.isArray(mountFlags) ||
    !mountFlags.every((flag) => typeof flag === 'string') ||
    typeof createdDir !== 'boolean' ||
    typeof stagedAt !== 'string'
  ) {
    return undefined;
  }
  return {
    key,
    stagingPath,
    accessType,
    ...(fsType === undefined ? {} : { fsType }),
    mountFlags,
    createdDir,
    stagedAt,
  };
}

export async function readStaging(layout: PoolLayout, key: string): Promise<StagingRecord | undefined> {
  const file = layout.stagingFile(key);
  const value = await readJson(file);
  if (value === undefined) return undefined;
  const staging = parseStaging(value, key);
  if (!staging) throw new DriverError(FailureType.Internal, `${file} is not a staging record for key ${key}`);
  return staging;
}

export async function writeStaging(layout: PoolLayout, staging: StagingRecord): Promise<void> {
  await writeJsonAtomic(layout.stagingFile(staging.key), staging);
}

export async function removeStaging(layout: PoolLayout, key: string): Promise<void> {
  await removeFile(layout.stagingFile(key));
}

/** Every readable staging record, sorted by key; anything else in staging/ is a stray (left alone). */
export async function listStaging(layout: PoolLayout): Promise<{ stagings: StagingRecord[]; strays: string[] }> {
  const read = (key: string) => readStaging(layout, key).catch(unreadable);
  const { entries, strays } = await readKeyedFiles(layout.stagingDir, read);
  return { stagings: entries, strays };
}

/** A staging file nobody can read is reported as a stray, not allowed to stop the pool from opening. */
function unreadable(error: unknown): undefined {
  if (error instanceof DriverError) return undefined;
  throw error;
}
