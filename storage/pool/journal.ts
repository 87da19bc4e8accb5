/**
 * The intent journal: one file per key under journal/, written before anything is allocated or freed and
 * removed when the operation is complete. Whatever is left there after a crash is settled by open(). Freezes of a
 * volume's filesystem for a copy are journaled too, under frozen/: written before the freeze, removed after the
 * thaw, so that a freeze a killed agent left is thawed when the pool opens again (reconcile.ts).
 */
import { promises as fs } from 'node:fs';
import { DriverError } from '../../common/failures';
import { readJson, removeFile, writeJsonAtomic, pathExists } from '../host/files';
import { readKeyedFiles } from './keyed-files';
import type { PoolLayout } from './pool-layout';
import { isProjectId } from './project-id';
import { isSize, isStringMap } from './volume-spec';

export interface Intent {
  op: 'create' | 'delete';
  key: string;
  name: string;
  capacityBytes: number;
  parameters: Record<string, string>;
  /** ISO 8601. */
  at: string;
  /** dir with --dir-quota=project: the volume's project, chosen before anything is made (storage/dir/project-quotas.ts). */
  projectId?: number;
}

function parseIntent(value: unknown, key: string): Intent | undefined {
  const intent = (typeof value === 'object' && value !== null ? value : {}) as Partial<Record<string, unknown>>;
  const { op, name, capacityBytes, parameters, at, projectId } = intent;
  if (
    (op !== 'create' && op !== 'delete') ||
    intent.key !== key ||
    typeof name !== 'string' ||
    !isSize(capacityBytes) ||
    !isStringMap(parameters) ||
    typeof at !== 'string' ||
    (projectId !== undefined && !isProjectId(projectId))
  ) {
    return undefined;
  }
  return { op, key, name, capacityBytes, parameters, at, ...(projectId === undefined ? {} : { projectId }) };
}

export async function writeIntent(layout: PoolLayout, intent: Intent): Promise<void> {
  const { op, key, name, capacityBytes, parameters, at, projectId } = intent;
  const project = projectId === undefined ? {} : { projectId };
  await writeJsonAtomic(layout.intentFile(key), { op, key, name, capacityBytes, parameters, at, ...project });
}

/** The intent in progress for `key`, if any and readable. */
export async function readIntent(layout: PoolLayout, key: string): Promise<Intent | undefined> {
  return parseIntent(await readJsonOrBad(layout.intentFile(key)), key);
}

export async function removeIntent(layout: PoolLayout, key: string): Promise<void> {
  await removeFile(layout.intentFile(key));
}

/**
 * Every readable intent, sorted by key. Files that are not intents are returned as strays (left alone: a
 * journal entry nobody can read is for a person to look at, not for the driver to guess about).
 */
export async function listIntents(layout: PoolLayout): Promise<{ intents: Intent[]; strays: string[] }> {
  const read = async (key: string) => parseIntent(await readJsonOrBad(layout.intentFile(key)), key);
  const { entries, strays } = await readKeyedFiles(layout.journalDir, read);
  return { intents: entries, strays };
}

/** A volume's filesystem frozen (or about to be) for a copy, as thawFrozen (reconcile.ts) needs to find it again. */
export interface FreezeRecord {
  /** The volume whose filesystem is frozen. */
  key: string;
  /** The mount point it was frozen through, as mountinfo shows it. */
  mountPoint: string;
  /** Its filesystem's device: a thaw goes only to a mount of this filesystem. */
  majorMinor: string;
  /** /proc/sys/kernel/random/boot_id: a reboot thaws everything, and may give the device number to another disk. */
  bootId: string;
  /** ISO 8601. */
  at: string;
}

const BOOT_ID = '/proc/sys/kernel/random/boot_id';

export async function currentBootId(): Promise<string> {
  return (await fs.readFile(BOOT_ID, 'utf8')).trim();
}

function parseFreeze(value: unknown, key: string): FreezeRecord | undefined {
  const record = (typeof value === 'object' && value !== null ? value : {}) as Partial<Record<string, unknown>>;
  const { mountPoint, majorMinor, bootId, at } = record;
  if (
    record.key !== key ||
    typeof mountPoint !== 'string' ||
    !mountPoint.startsWith('/') ||
    typeof majorMinor !== 'string' ||
    !/^\d+:\d+$/.test(majorMinor) ||
    typeof bootId !== 'string' ||
    typeof at !== 'string'
  ) {
    return undefined;
  }
  return { key, mountPoint, majorMinor, bootId, at };
}

/** Written (and fsynced) before the freeze: a crash right after the freeze must find it. */
export async function writeFreeze(layout: PoolLayout, record: FreezeRecord): Promise<void> {
  await fs.mkdir(layout.frozenDir, { recursive: true });
  const { key, mountPoint, majorMinor, bootId, at } = record;
  await writeJsonAtomic(layout.freezeFile(key), { key, mountPoint, majorMinor, bootId, at });
}

/** Removed only after the thaw. */
export async function removeFreeze(layout: PoolLayout, key: string): Promise<void> {
  await removeFile(layout.freezeFile(key));
}

/** Every readable freeze record, sorted by key; unreadable ones are strays, left for a person. */
export async function listFreezes(layout: PoolLayout): Promise<{ freezes: FreezeRecord[]; strays: string[] }> {
  if (!(await pathExists(layout.frozenDir))) return { freezes: [], strays: [] }; // a pool no copy froze yet
  const read = async (key: string) => parseFreeze(await readJsonOrBad(layout.freezeFile(key)), key);
  const { entries, strays } = await readKeyedFiles(layout.frozenDir, read);
  return { freezes: entries, strays };
}

/** A journal entry that is not JSON is reported as a stray rather than stopping the pool from opening. */
async function readJsonOrBad(file: string): Promise<unknown> {
  try {
    return await readJson(file);
  } catch (error) {
    if (error instanceof DriverError) return undefined;
    throw error;
  }
}
