import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';

/**
 * The one way this project runs a program to completion (the node's system tools, the dev and test harnesses):
 * an argument array and never a shell (a caller that wants one runs `sh -c` itself), output collected as text,
 * and, when asked, a time limit after which the program is killed (SIGKILL). `runProcess` never rejects: what a
 * failure means is the caller's (storage/host/tools.ts turns it into a driver failure; the harnesses throw
 * `describeFailure`'s text, as `runChecked` does). Programs that keep running (servers, agents) are not run here.
 */
export interface RunOptions {
  /** The program's environment; ours when not given. */
  env?: NodeJS.ProcessEnv;
  /**
   * Killed (SIGKILL) once it has run this long; no limit when not given. The run ends when its output closes, as
   * under execFile: a child the program started and left holding the pipes keeps the run going.
   */
  timeoutMs?: number;
  /** Characters of stdout, and of stderr, kept; a program that prints more is killed (SIGKILL) and fails. */
  maxBuffer?: number;
  /** 'ignore' (the default) gives the program /dev/null; 'pipe' leaves a pipe open and unwritten, as execFile does. */
  stdin?: 'ignore' | 'pipe';
  /** Mirror its output on our stderr as it comes (the progress of a long install). */
  echo?: boolean;
}

export interface ProcessResult {
  /** `command arg…`, as messages name it: secrets travel in the environment, never in arguments. */
  commandLine: string;
  /** The exit code; null when the program was killed by a signal or never started. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stdout and stderr interleaved, as they came. */
  output: string;
  /** The program could not be started (ENOENT: there is no such program). */
  spawnError?: NodeJS.ErrnoException;
  /** Why we killed it: it ran past `timeoutMs`, or printed more than `maxBuffer` on that stream. */
  killedFor?: 'timeout' | 'stdout' | 'stderr';
}

/** 16 MiB: far beyond what any tool here prints, and a bound on what a runaway one costs us. */
const DEFAULT_MAX_BUFFER = 16 * 1024 * 1024;
/** Lines of output a failure's description ends with. */
const FAILURE_TAIL_LINES = 15;

/** Runs a program to completion; resolves with what happened, never rejects. */
export function runProcess(command: string, args: readonly string[], options: RunOptions = {}): Promise<ProcessResult> {
  const result: ProcessResult = {
    commandLine: [command, ...args].join(' '),
    code: null,
    signal: null,
    stdout: '',
    stderr: '',
    output: '',
  };
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      env: options.env ?? process.env,
      stdio: [options.stdin ?? 'ignore', 'pipe', 'pipe'],
    });
    const kill = (reason: NonNullable<ProcessResult['killedFor']>): void => {
      if (result.killedFor !== undefined) return;
      result.killedFor = reason;
      child.kill('SIGKILL');
    };
    const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => kill('timeout'), options.timeoutMs);
    collectOutput(child.stdout, 'stdout', result, options, kill);
    collectOutput(child.stderr, 'stderr', result, options, kill);
    let settled = false;
    const settle = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    child.on('error', (error) => {
      result.spawnError = error;
      settle();
    });
    child.on('close', (code, signal) => {
      result.code = code;
      result.signal = signal;
      settle();
    });
  });
}

function collectOutput(
  stream: Readable | null, // never null: both are pipes
  name: 'stdout' | 'stderr',
  result: ProcessResult,
  options: RunOptions,
  kill: (reason: 'stdout' | 'stderr') => void,
): void {
  const maxBuffer = options.maxBuffer ?? DEFAULT_MAX_BUFFER;
  stream?.setEncoding('utf8');
  stream?.on('data', (chunk: string) => {
    if (options.echo === true) process.stderr.write(chunk);
    if (result.killedFor !== undefined) return;
    const room = maxBuffer - result[name].length;
    const kept = chunk.length > room ? chunk.slice(0, room) : chunk;
    result[name] += kept;
    result.output += kept;
    if (chunk.length > room) kill(name);
  });
}

/** Exit code 0, and neither killed nor failed to start. */
export function succeeded(result: ProcessResult): boolean {
  return result.code === 0 && result.spawnError === undefined && result.killedFor === undefined;
}

/** How a run failed, in a few words: "exited with code 2", "could not start (not found)", "timed out (killed)". */
export function failureReason(result: ProcessResult): string {
  if (result.spawnError !== undefined) {
    const why = result.spawnError.code === 'ENOENT' ? 'not found' : result.spawnError.message;
    return `could not start (${why})`;
  }
  if (result.killedFor === 'timeout') return 'timed out (killed)';
  if (result.killedFor !== undefined) return `printed too much on ${result.killedFor} (killed)`;
  if (result.signal !== null) return `was killed by ${result.signal}`;
  return `exited with code ${String(result.code)}`;
}

/** The command line, how it failed and the last lines it printed (stderr with stdout, as they came). */
export function describeFailure(result: ProcessResult): string {
  const tail = result.output.trim().split('\n').slice(-FAILURE_TAIL_LINES).join('\n    ');
  return `\`${result.commandLine}\` ${failureReason(result)}${tail === '' ? '' : `:\n    ${tail}`}`;
}

/** Runs a program to completion; resolves with its stdout, rejects with `describeFailure`'s text. */
export async function runChecked(command: string, args: readonly string[], options: RunOptions = {}): Promise<string> {
  const result = await runProcess(command, args, options);
  if (!succeeded(result)) throw new Error(describeFailure(result));
  return result.stdout;
}
