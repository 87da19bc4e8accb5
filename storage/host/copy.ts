/**
 * Copies inside the pool, for snapshots, restores and clones: cp(1) through the process runner, with reflinks
 * where the filesystem has them (XFS with reflink, btrfs: the copy shares blocks and takes no time) and a plain
 * copy elsewhere. Both sides are paths the pool layout made; neither ever comes from the CO. Each copy runs within
 * the time it is given (common/copy-budget.ts: derived from the volume's size), its sync included.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import { fsyncDir } from './atomic-file';
import { ToolError, runTool } from './tools';

/** When a copy must be done by; the tools it runs (cp, sync) get what is left of it. */
class Deadline {
  private readonly at: number;

  constructor(readonly budgetMs: number) {
    this.at = Date.now() + budgetMs;
  }

  /** What is left, at least 1 ms: a tool started past the deadline is killed at once and fails as timed out. */
  leftMs(): number {
    return Math.max(1, this.at - Date.now());
  }
}

/**
 * Copies the content of directory `from` (dotfiles included) into the existing directory `to`, keeping modes,
 * owners, times, links and extended attributes (`cp -a`). Symbolic links are copied as links, never followed, so
 * nothing outside `from` is read. The filesystem is synced after: the caller writes its record next.
 */
export async function copyTree(from: string, to: string, budgetMs: number): Promise<void> {
  const deadline = new Deadline(budgetMs);
  await copy(['-a', '--reflink=auto', '--', `${from}${path.sep}.`, to], to, deadline);
  await withinBudget(to, deadline, () => runTool('sync', ['-f', to], { timeoutMs: deadline.leftMs() }));
}

/** Copies an image file, holes kept as holes (`--sparse=always`), and fsyncs it. */
export async function copyImage(from: string, to: string, budgetMs: number): Promise<void> {
  const deadline = new Deadline(budgetMs);
  await copy(['--reflink=auto', '--sparse=always', '--', from, to], to, deadline);
  await syncFile(to, deadline);
}

/**
 * A reflink of a whole image file in one FICLONE (`cp --reflink=always`), and fsynced: the filesystem shares the
 * source's extents under its inode locks, so no write lands half in the copy. False, with nothing left at `to`,
 * when the pool's filesystem has no reflinks.
 */
export async function cloneImage(from: string, to: string, budgetMs: number): Promise<boolean> {
  const deadline = new Deadline(budgetMs);
  try {
    await copy(['--reflink=always', '--', from, to], to, deadline);
  } catch (error) {
    if (!(error instanceof ToolError && /failed to clone/i.test(error.stderr))) throw error;
    await fs.rm(to, { force: true });
    return false;
  }
  await syncFile(to, deadline);
  return true;
}

/**
 * fsync of the copy by sync(1) (a plain copy leaves its whole size dirty: flushing it is part of the copy's time),
 * so that it runs within the budget like the copy; then its directory.
 */
async function syncFile(file: string, deadline: Deadline): Promise<void> {
  await withinBudget(file, deadline, () => runTool('sync', ['--', file], { timeoutMs: deadline.leftMs() }));
  await fsyncDir(path.dirname(file));
}

async function copy(args: string[], to: string, deadline: Deadline): Promise<void> {
  try {
    await withinBudget(to, deadline, () => runTool('cp', args, { timeoutMs: deadline.leftMs() }));
  } catch (error) {
    if (error instanceof ToolError && /No space left/i.test(error.stderr)) {
      throw new DriverError(FailureType.ResourceExhausted, `no space left on the pool's filesystem to copy to ${to}`);
    }
    throw error;
  }
}

/** A tool killed at the deadline fails retryably, and says which budget it ran out of and how to give more. */
async function withinBudget<T>(to: string, deadline: Deadline, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (!(error instanceof ToolError && /timed out after/.test(error.message))) throw error;
    throw new ToolError(
      FailureType.Internal,
      `copying to ${to} took longer than its budget of ${Math.round(deadline.budgetMs / 1000)}s (${error.message}); ` +
        "the next attempt starts again: if the pool's disk is slower than the node's --copy-rate, lower it",
      error.stderr,
    );
  }
}
