/**
 * The intent journal: one file per key under journal/, written before anything is allocated or freed and
 * removed when the operation is complete. Whatever is left there after a crash is settled by open().
 */
import { DriverError } from '../../common/failures';
import { readJson, removeFile, writeJsonAtomic } from '../host/atomic-file';
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

/** A journal entry that is not JSON is reported as a stray rather than stopping the pool from opening. */
async function readJsonOrBad(file: string): Promise<unknown> {
  try {
    return await readJson(file);
  } catch (error) {
    if (error instanceof DriverError) return undefined;
    throw error;
  }
}
