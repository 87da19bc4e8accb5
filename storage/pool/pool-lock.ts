/**
 * One agent process owns a pool. <pool>/.lock holds the owner's pid on its first line, then a token naming this
 * lock so that a release never removes a lock another process has since taken over. A lock whose pid is dead
 * is taken over, and so is one holding our own pid: the agent restarted in a fresh PID namespace, or this
 * process reopened the pool after a simulated crash.
 */
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { DriverError, FailureType } from '../../common/failures';
import { readFileIfExists, removeFile, writeFileOnce, errorCode, isNotFound } from '../host/files';
import type { PoolLayout } from './pool-layout';

const ATTEMPTS = 5;

export interface PoolLock {
  /** Removes the lock file if it is still ours. */
  release(): Promise<void>;
}

/** The pid on the lock's first line; undefined for anything else (a lock nobody could have written). */
export function lockHolder(text: string): number | undefined {
  const first = text.split('\n')[0]?.trim() ?? '';
  const pid = /^\d{1,10}$/.test(first) ? Number(first) : 0;
  return pid > 0 ? pid : undefined;
}

export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return errorCode(error) === 'EPERM';
  }
}

export async function acquirePoolLock(layout: PoolLayout): Promise<PoolLock> {
  const file = layout.lockFile;
  const content = `${process.pid}\n${randomUUID()}\n`;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (await writeFileOnce(file, content)) return { release: () => releaseLock(file, content) };
    const seen = await readFileIfExists(file);
    if (seen === undefined) continue;
    const holder = lockHolder(seen);
    if (holder !== undefined && holder !== process.pid && isProcessAlive(holder)) {
      throw new DriverError(FailureType.FailedPrecondition, `pool ${layout.root} is in use by process ${holder}`);
    }
    await removeStaleLock(file, seen);
  }
  throw new DriverError(FailureType.Aborted, `could not lock pool ${layout.root}: other processes keep taking it`);
}

/**
 * Removes the lock only if it still holds what was judged stale: it is moved aside (atomically) and put back
 * if another process replaced it in the meantime, so two processes taking over a stale lock cannot both win.
 */
async function removeStaleLock(file: string, stale: string): Promise<void> {
  const aside = `${file}.stale-${randomUUID()}`;
  try {
    await fs.rename(file, aside);
  } catch (error) {
    if (isNotFound(error)) return;
    throw error;
  }
  try {
    if ((await fs.readFile(aside, 'utf8')) !== stale) await restoreLock(aside, file);
  } finally {
    await fs.rm(aside, { force: true });
  }
}

async function restoreLock(aside: string, file: string): Promise<void> {
  try {
    await fs.link(aside, file);
  } catch (error) {
    if (errorCode(error) !== 'EEXIST') throw error;
  }
}

async function releaseLock(file: string, content: string): Promise<void> {
  if ((await readFileIfExists(file)) === content) await removeFile(file);
}
