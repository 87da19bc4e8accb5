/**
 * The system tools the node needs (losetup, mkfs, mount, ...), run through common/run-process.ts: always an
 * argument array, never a shell, and always with a timeout, so that a path from the CO can never become a command
 * and a hung tool cannot hold the pool for ever. Here is what is the node's own: where the tools are found, how long
 * they may run, and which driver failure a failed run is.
 */
import { DriverError, FailureType } from '../../common/failures';
import { failureReason, runProcess, succeeded, type ProcessResult } from '../../common/run-process';

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
