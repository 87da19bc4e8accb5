/**
 * Settling the journal. open() settles every entry a crash left behind; the live path settles its own entry
 * with the same code, so recovery is not a rarely run special case.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { OpenReport } from './backend';
import { isTempFileName } from '../host/atomic-file';
import { listIntents, removeIntent } from './journal';
import type { Intent } from './journal';
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

/** Settles every readable journal entry; unreadable ones are returned as strays. */
export async function settleJournal(
  layout: PoolLayout,
  release?: Release,
): Promise<{ reconciled: Reconciled[]; strays: string[] }> {
  const { intents, strays } = await listIntents(layout);
  const reconciled: Reconciled[] = [];
  for (const intent of intents) {
    reconciled.push({ key: intent.key, op: intent.op, outcome: await settleIntent(layout, intent, release) });
  }
  return { reconciled, strays };
}

export async function reconcilePool(
  layout: PoolLayout,
  release?: Release,
): Promise<Pick<OpenReport, 'reconciled' | 'strays'>> {
  // Only this process writes in records/, journal/ and staging/ (it holds the pool lock): temporary files there
  // are leftovers of a crash, never a write in progress.
  await removeTempFiles(layout.recordsDir);
  await removeTempFiles(layout.journalDir);
  await removeTempFiles(layout.stagingDir);
  await removeTempFiles(layout.snapshotRecordsDir);
  await removeTempFiles(layout.snapshotJournalDir);
  const { reconciled, strays } = await settleJournal(layout, release);
  const snapshots = await settleSnapshotJournal(layout);
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
