/**
 * The intent journal, and settling it. One file per key under journal/, written before anything is allocated or
 * freed and removed when the operation is complete. open() settles every entry a crash left behind; the live path
 * settles its own entry with the same code, so recovery is not a rarely run special case.
 *
 * Snapshots are journaled the same way under snapshots/journal/ (snapshots.ts makes and deletes the copies), so that
 * every call of the pool settles both journals here.
 *
 * Freezes of a volume's filesystem for a copy are journaled too, under frozen/: written before the freeze, removed
 * after the thaw, so that a freeze a killed agent left is thawed when the pool opens again, or before the next call
 * changes the pool.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError } from '../../common/failures';
import type { OpenReport } from './backend';
import {
  isTempFileName,
  jsonFields,
  pathExists,
  readJson,
  removeFile,
  removeTree,
  writeJsonAtomic,
} from '../host/files';
import { readMounts, thawFilesystem } from '../host/mounts';
import { isVolumeKey, keyOfJsonFileName, readKeyedFiles } from './pool-layout';
import type { PoolBackend } from './pool-backend';
import type { PoolLayout } from './pool-layout';
import { isProjectId, isSize, isStringMap, listRecordKeys, recordExists, removeRecord } from './records';

export interface Intent {
  op: 'create' | 'delete';
  key: string;
  name: string;
  capacityBytes: number;
  parameters: Record<string, string>;
  /** ISO 8601. */
  at: string;
  /** dir with --dir-quota=project: the volume's project, chosen before anything is made (dir/dir-backend.ts). */
  projectId?: number;
}

function parseIntent(value: unknown, key: string): Intent | undefined {
  const intent = jsonFields(value);
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

export type Reconciled = OpenReport['reconciled'][number];

/**
 * A create whose record was written is done ('kept'); one without a record allocated at most a directory, which
 * the backend releases ('rolled-back'). A delete is always driven forward ('completed'): the backend releases what
 * the volume holds (dir: its directory, then its project's limit; loop: its devices, then its directory), then its
 * record goes.
 */
export async function settleIntent(pool: PoolBackend, intent: Intent): Promise<Reconciled['outcome']> {
  const { layout } = pool;
  if (intent.op === 'create' && (await recordExists(layout, intent.key))) {
    await removeIntent(layout, intent.key);
    return 'kept';
  }
  await pool.release(intent);
  if (intent.op === 'delete') await removeRecord(layout, intent.key);
  await removeIntent(layout, intent.key);
  return intent.op === 'create' ? 'rolled-back' : 'completed';
}

/** Keys whose work is under way in this process (a copy made outside the pool lock): their entries are left alone. */
export type InFlight = (key: string) => boolean;

const NONE_IN_FLIGHT: InFlight = () => false;

/** Settles every readable journal entry but those in flight; unreadable ones are returned as strays. */
export async function settleJournal(
  pool: PoolBackend,
  inFlight: InFlight = NONE_IN_FLIGHT,
): Promise<{ reconciled: Reconciled[]; strays: string[] }> {
  const { intents, strays } = await listIntents(pool.layout);
  const reconciled: Reconciled[] = [];
  for (const intent of intents.filter((entry) => !inFlight(entry.key))) {
    reconciled.push({ key: intent.key, op: intent.op, outcome: await settleIntent(pool, intent) });
  }
  return { reconciled, strays };
}

/* The snapshot journal: the same rules, under snapshots/journal/. */

export interface SnapshotIntent {
  op: 'create' | 'delete';
  key: string;
  name: string;
  sourceKey: string;
  sizeBytes: number;
  /** ISO 8601. */
  at: string;
}

function parseSnapshotIntent(value: unknown, key: string): SnapshotIntent | undefined {
  const intent = jsonFields(value);
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
      return parseSnapshotIntent(await readJson(layout.snapshotIntentFile(key)), key);
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
  inFlight: InFlight = NONE_IN_FLIGHT,
): Promise<{ reconciled: Reconciled[]; strays: string[] }> {
  const { intents, strays } = await listSnapshotIntents(layout);
  const reconciled: Reconciled[] = [];
  for (const intent of intents.filter((entry) => !inFlight(entry.key))) {
    const outcome = await settleSnapshotIntent(layout, intent);
    reconciled.push({ key: intent.key, op: `snapshot-${intent.op}`, outcome });
  }
  return { reconciled, strays };
}

/** A volume's filesystem frozen (or about to be) for a copy, as thawFrozen needs to find it again. */
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
  const record = jsonFields(value);
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

/**
 * Thaws every filesystem a freeze record names, but those of copies in flight, and removes the records: an agent
 * killed while it copied (a rollout's SIGKILL, the OOM killer) left the workload's filesystem frozen, and only this
 * thaws it. The thaw goes only to a mount of the recorded filesystem; a record of an earlier boot is only removed
 * (a reboot thawed everything, and the device number may now be another disk's). Returns the volumes thawed.
 */
export async function thawFrozen(layout: PoolLayout, inFlight: InFlight = NONE_IN_FLIGHT): Promise<string[]> {
  const { freezes } = await listFreezes(layout);
  const thawed: string[] = [];
  const bootId = await currentBootId();
  for (const freeze of freezes.filter((entry) => !inFlight(entry.key))) {
    if (freeze.bootId === bootId && (await thawRecorded(freeze))) thawed.push(freeze.key);
    await removeFreeze(layout, freeze.key);
  }
  return thawed;
}

/** Thaws through the recorded mount point if it still shows the filesystem, else through any mount of it. */
async function thawRecorded(freeze: FreezeRecord): Promise<boolean> {
  const mounts = (await readMounts()).filter((entry) => entry.majorMinor === freeze.majorMinor);
  const mountPoints = [...new Set(mounts.map((entry) => entry.mountPoint))].sort((a, b) =>
    a === freeze.mountPoint ? -1 : b === freeze.mountPoint ? 1 : 0,
  );
  for (const mountPoint of mountPoints) {
    const top = (await readMounts()).filter((entry) => entry.mountPoint === mountPoint).pop();
    if (top?.majorMinor !== freeze.majorMinor) continue; // covered by another mount: a thaw there would miss
    await thawFilesystem(mountPoint);
    return true;
  }
  return false; // not mounted any more: nothing writes to it, nothing to thaw
}

/** `inFlight`: the volume and snapshot keys of copies still running in this process (a pool opened again). */
export async function reconcilePool(
  pool: PoolBackend,
  inFlight: { volume: InFlight; snapshot: InFlight } = { volume: NONE_IN_FLIGHT, snapshot: NONE_IN_FLIGHT },
): Promise<Pick<OpenReport, 'reconciled' | 'strays'>> {
  const { layout } = pool;
  // Only this process writes in records/, journal/ and staging/ (it holds the pool lock): temporary files there
  // are leftovers of a crash, never a write in progress.
  await removeTempFiles(layout.recordsDir);
  await removeTempFiles(layout.journalDir);
  await removeTempFiles(layout.stagingDir);
  await removeTempFiles(layout.frozenDir);
  await removeTempFiles(layout.snapshotRecordsDir);
  await removeTempFiles(layout.snapshotJournalDir);
  const { reconciled, strays } = await settleJournal(pool, inFlight.volume);
  const snapshots = await settleSnapshotJournal(layout, inFlight.snapshot);
  reconciled.push(...snapshots.reconciled);
  strays.push(...snapshots.strays, ...(await findStrays(layout)), ...(await findSnapshotStrays(layout)));
  return { reconciled, strays: strays.sort() };
}

/** Volume directories without a record and records without a directory: reported, never deleted. */
async function findStrays(layout: PoolLayout): Promise<string[]> {
  const strays: string[] = [];
  const recordKeys = new Set(await listRecordKeys(layout));
  for (const name of await fs.readdir(layout.volumesDir)) {
    if (!isVolumeKey(name) || !recordKeys.has(name)) strays.push(path.join(layout.volumesDir, name));
  }
  for (const name of await fs.readdir(layout.recordsDir)) {
    const key = keyOfJsonFileName(name);
    if (key === undefined || !(await pathExists(layout.volumeDir(key))))
      strays.push(path.join(layout.recordsDir, name));
  }
  return strays;
}

/** Snapshot copies without a record and records without a copy: reported, never deleted. */
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

async function removeTempFiles(dir: string): Promise<void> {
  for (const name of await fs.readdir(dir)) {
    if (isTempFileName(name)) await fs.rm(path.join(dir, name), { force: true });
  }
}
