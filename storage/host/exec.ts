/**
 * Runs the system tools the node needs (losetup, mkfs, mount, ...): always execFile with an argument array, never
 * a shell, and always with a timeout, so that a path from the CO can never become a command and a hung tool
 * cannot hold the pool for ever.
 */
import { execFile } from 'node:child_process';
import { DriverError, FailureType } from '../../common/failures';

/** Long enough for a slow disk; a tool still running after this is killed and the call fails (retryable). */
export const TOOL_TIMEOUT_MS = 60_000;
/** mkfs and resize of large volumes. */
export const FORMAT_TIMEOUT_MS = 10 * 60_000;

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
export function runTool(command: string, args: string[], options: ToolOptions = {}): Promise<string> {
  const timeout = options.timeoutMs ?? TOOL_TIMEOUT_MS;
  const env = { ...process.env, PATH, LC_ALL: 'C' };
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout, killSignal: 'SIGKILL', env }, (error, stdout, stderr) => {
      const code = typeof error?.code === 'number' ? error.code : undefined;
      const quietOk = !options.stderrFails || stderr.trim() === '';
      if (quietOk && (!error || (code !== undefined && options.okExitCodes?.includes(code)))) return resolve(stdout);
      if (error?.code === 'ENOENT') {
        return reject(new ToolError(FailureType.FailedPrecondition, `${command} is not installed on this node`, ''));
      }
      const why = error?.killed ? `timed out after ${timeout / 1000}s` : stderr.trim() || (error?.message ?? '');
      reject(new ToolError(FailureType.Internal, `${[command, ...args].join(' ')} failed: ${why}`, stderr));
    });
  });
}
