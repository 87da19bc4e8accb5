/**
 * The system tools the node needs (losetup, mkfs, mount, cp, ...), run through common/run-process.ts: always an
 * argument array, never a shell, and always with a timeout, so that a path from the CO can never become a command
 * and a hung tool cannot hold the pool for ever. Here is what is the node's own: where the tools are found, how long
 * they may run, and which driver failure a failed run is; and the copies made with cp(1) for snapshots, restores
 * and clones, each within its time budget.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DriverError, FailureType } from '../../common/failures';
import { failureReason, runProcess, succeeded, type ProcessResult } from '../../common/run-process';
import { fsyncDir } from './files';

/** Long enough for a slow disk; a tool still running after this is killed and the call fails (retryable). */
export const TOOL_TIMEOUT_MS = 60_000;
/** mkfs and resize of large volumes. */
export const FORMAT_TIMEOUT_MS = 10 * 60_000;
/** Output kept of a tool (execFile's default, which the tools ran with before): a tool printing more fails. */
const TOOL_MAX_BUFFER = 1024 * 1024;

/** The sbin directories are added: a node agent's PATH often lacks them, and losetup and mkfs live there. */
const PATH = [process.env.PATH ?? '', '/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/bin', '/bin'].join(':');

/** A failed tool run; stderr is kept for callers that tell one failure from another. */
export class ToolError extends DriverError {
  constructor(
    type: FailureType,
    message: string,
    readonly stderr: string,
  ) {
    super(type, message);
    this.name = 'ToolError';
  }
}

export interface ToolOptions {
  timeoutMs?: number;
  /** Exit codes that mean success besides 0 (e2fsck: 1 = errors corrected). */
  okExitCodes?: number[];
  /** Output on stderr means failure even with exit code 0 (xfs_quota reports many failures only there). */
  stderrFails?: boolean;
}

/** Resolves with stdout; rejects with a ToolError naming the command and what it printed. */
export async function runTool(command: string, args: string[], options: ToolOptions = {}): Promise<string> {
  const timeoutMs = options.timeoutMs ?? TOOL_TIMEOUT_MS;
  const env = { ...process.env, PATH, LC_ALL: 'C' };
  // stdin stays an open pipe, as it was under execFile: no tool here reads it.
  const result = await runProcess(command, args, { env, timeoutMs, maxBuffer: TOOL_MAX_BUFFER, stdin: 'pipe' });
  if (toolSucceeded(result, options)) return result.stdout;
  if (result.spawnError?.code === 'ENOENT') {
    throw new ToolError(FailureType.FailedPrecondition, `${command} is not installed on this node`, '');
  }
  const why =
    result.killedFor === 'timeout'
      ? `timed out after ${timeoutMs / 1000}s`
      : result.stderr.trim() || failureReason(result);
  throw new ToolError(FailureType.Internal, `${result.commandLine} failed: ${why}`, result.stderr);
}

/** Exit code 0 or one the caller accepts, and, where stderr means failure, nothing on it. */
function toolSucceeded(result: ProcessResult, options: ToolOptions): boolean {
  if (options.stderrFails === true && result.stderr.trim() !== '') return false;
  if (succeeded(result)) return true;
  const exitedWith = result.spawnError === undefined && result.killedFor === undefined ? result.code : null;
  return exitedWith !== null && (options.okExitCodes?.includes(exitedWith) ?? false);
}

/*
 * Copies inside the pool: cp(1) with reflinks where the filesystem has them (XFS with reflink, btrfs: the copy
 * shares blocks and takes no time) and a plain copy elsewhere. Both sides are paths the pool layout made; neither
 * ever comes from the CO. Each copy runs within the time it is given (common/copy-budget.ts: derived from the
 * volume's size), its sync included.
 */

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

/**
 * The content of directory `from` as one archive file `archive` (a move's copy of a dir volume, served chunk by chunk
 * as an image is): GNU tar, POSIX format, numeric owners, modes, times, extended attributes and ACLs kept, holes kept
 * as holes; symbolic links stored as links, never followed, so nothing outside `from` is read. Synced after: the
 * offer that serves it is written next.
 */
export async function packTree(from: string, archive: string, budgetMs: number): Promise<void> {
  const deadline = new Deadline(budgetMs);
  // Access and change times left out: reading the tree changes them, and they are not restored anyway.
  const args = [
    '--create',
    '--format=posix',
    '--pax-option=delete=atime,delete=ctime',
    '--sparse',
    ...TAR_METADATA,
    `--file=${archive}`,
    `--directory=${from}`,
  ];
  await withinBudget(archive, deadline, () => runTool('tar', [...args, '.'], { timeoutMs: deadline.leftMs() }));
  await syncFile(archive, deadline);
}

/**
 * Extracts an archive packTree made (on another node: verified chunk by chunk against the source's manifest
 * first) into the existing directory `to`, with owners, modes, times, extended attributes and ACLs. GNU tar strips
 * a leading `/`, skips members whose names hold `..` and makes a link that points outside only after every file, so
 * nothing is written outside `to` (docs/security.md); such members fail the extract. Synced after.
 */
export async function unpackTree(archive: string, to: string, budgetMs: number): Promise<void> {
  const deadline = new Deadline(budgetMs);
  const args = ['--extract', '--same-owner', '--same-permissions', ...TAR_METADATA, `--file=${archive}`];
  try {
    await withinBudget(to, deadline, () =>
      runTool('tar', [...args, `--directory=${to}`], { timeoutMs: deadline.leftMs() }),
    );
  } catch (error) {
    if (error instanceof ToolError && /No space left|Disk quota exceeded/i.test(error.stderr)) {
      throw new DriverError(
        FailureType.ResourceExhausted,
        `no space left on the pool's filesystem to extract to ${to}`,
      );
    }
    throw error;
  }
  await withinBudget(to, deadline, () => runTool('sync', ['-f', to], { timeoutMs: deadline.leftMs() }));
}

/** What an archive keeps beside the data, on both sides. */
const TAR_METADATA = ['--numeric-owner', '--xattrs', '--xattrs-include=*', '--acls'];

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
