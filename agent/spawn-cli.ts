import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../common/project-root';
import { withAgentRuntimeEnv } from './process-tuning';

/** The compiled CLI entry; found from the package root so that tests running from source use dist/ too. */
export const CLI_MAIN = path.join(findProjectRoot(), 'dist', 'cli', 'main.js');

/**
 * Starts `durable-csi <args>` as its own OS process, its output appended to logFile. The child is tied to us
 * in two ways (docs/dev-stack.md): it runs in its own process group, so a terminal's Ctrl-C reaches only us and
 * we stop it in order; and it holds an IPC channel to us, whose closing tells it that we are gone, however we
 * died (agent/shutdown.ts), so it never outlives us. It runs with the agents' runtime settings (agent/process-tuning.ts).
 */
export function spawnCli(
  args: string[],
  logFile: string,
  env: NodeJS.ProcessEnv = process.env,
  /** Options for node itself, before the script (those NODE_OPTIONS refuses, such as --cpu-prof). */
  nodeArgs: string[] = [],
  /**
   * A command that execs node in place, such as `unshare --net --` (a test's own network namespace). It must exec,
   * not fork: the child's PID and its IPC channel (the tether) stay node's.
   */
  launcher: string[] = [],
): ChildProcess {
  fs.mkdirSync(path.dirname(logFile), { recursive: true });
  const log = fs.openSync(logFile, 'a');
  try {
    const [command, ...commandArgs] = [...launcher, process.execPath, ...nodeArgs, CLI_MAIN, ...args] as [
      string,
      ...string[],
    ];
    const child = spawn(command, commandArgs, {
      stdio: ['ignore', log, log, 'ipc'],
      detached: true,
      env: withAgentRuntimeEnv(env),
    });
    // The channel is a tether, not a conversation: it must not keep our event loop alive.
    child.channel?.unref();
    return child;
  } finally {
    fs.closeSync(log);
  }
}

/** SIGTERM, then SIGKILL if the process has not exited after graceMs. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}
