/**
 * Settling the journal. open() settles every entry a crash left behind; the live path settles its own entry
 * with the same code, so recovery is not a rarely run special case.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { OpenReport } from './backend';
import { isTempFileName } from '../host/files';
import { readMounts, thawFilesystem } from '../host/mounts';
import { currentBootId, listFreezes, listIntents, removeFreeze, removeIntent } from './journal';
import type { FreezeRecord, Intent } from './journal';
import { isVolumeKey, keyOfJsonFileName } from './pool-layout';
import type { PoolLayout } from './pool-layout';
import { findSnapshotStrays, settleSnapshotJournal } from './snapshots';
import { removeVolumeDir, volumeDirExists } from './volume-dirs';
import { listRecordKeys, recordExists, removeRecord } from './volume-records';

export type Reconciled = OpenReport['reconciled'][number];

/** Frees everything a volume holds in the pool (dir: its directory; loop: its devices, then its directory). */
export type Release = (layout: PoolLayout, key: string) => Promise<void>;

/**
 * A create whose record was written is done ('kept'); one without a record allocated at most a directory,
 * which is removed ('rolled-back'). A delete is always driven forward ('completed').
 */
export async function settleIntent(
  layout: PoolLayout,
  intent: Intent,
  release: Release = removeVolumeDir,
): Promise<Reconciled['outcome']> {
  if (intent.op === 'create' && (await recordExists(layout, intent.key))) {
    await removeIntent(layout, intent.key);
    return 'kept';
  }
  await release(layout, intent.key);
  if (intent.op === 'delete') await removeRecord(layout, intent.key);
  await removeIntent(layout, intent.key);
  return intent.op === 'create' ? 'rolled-back' : 'completed';
}

/** Keys whose work is under way in this process (a copy made outside the pool lock): their entries are left alone. */
export type InFlight = (key: string) => boolean;

const NONE_IN_FLIGHT: InFlight = () => false;

/** Settles every readable journal entry but those in flight; unreadable ones are returned as strays. */
export async function settleJournal(
  layout: PoolLayout,
  release?: Release,
  inFlight: InFlight = NONE_IN_FLIGHT,
): Promise<{ reconciled: Reconciled[]; strays: string[] }> {
  const { intents, strays } = await listIntents(layout);
  const reconciled: Reconciled[] = [];
  for (const intent of intents.filter((entry) => !inFlight(entry.key))) {
    reconciled.push({ key: intent.key, op: intent.op, outcome: await settleIntent(layout, intent, release) });
  }
  return { reconciled, strays };
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
  layout: PoolLayout,
  release?: Release,
  inFlight: { volume: InFlight; snapshot: InFlight } = { volume: NONE_IN_FLIGHT, snapshot: NONE_IN_FLIGHT },
): Promise<Pick<OpenReport, 'reconciled' | 'strays'>> {
  // Only this process writes in records/, journal/ and staging/ (it holds the pool lock): temporary files there
  // are leftovers of a crash, never a write in progress.
  await removeTempFiles(layout.recordsDir);
  await removeTempFiles(layout.journalDir);
  await removeTempFiles(layout.stagingDir);
  await removeTempFiles(layout.frozenDir);
  await removeTempFiles(layout.snapshotRecordsDir);
  await removeTempFiles(layout.snapshotJournalDir);
  const { reconciled, strays } = await settleJournal(layout, release, inFlight.volume);
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
    if (key === undefined || !(await volumeDirExists(layout, key))) strays.push(path.join(layout.recordsDir, name));
  }
  return strays;
}

async function removeTempFiles(dir: string): Promise<void> {
  for (const name of await fs.readdir(dir)) {
    if (isTempFileName(name)) await fs.rm(path.join(dir, name), { force: true });
  }
}
